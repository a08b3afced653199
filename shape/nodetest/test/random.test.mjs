// A randomized differential: random shapes drawn from the where grammar
// the engine keeps exact, random transactions; after quiescing, every
// client's rows equal PostgreSQL's answer to the shape's query. Then the
// server is SIGKILLed mid-stream and restarted on its data directory:
// every client continues with its handle, no 409, nothing lost or
// repeated.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { ShapeStream } from '@electric-sql/client'
import { sql, unique, until, pgText, sameRows, closeDb, SHAPE_URL, control, norm, track } from '../lib.mjs'

after(closeDb)

// mulberry32: a small seeded PRNG, so a failure names its seed.
function prng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const COLS = ['id', 'a', 'b', 'c', 'd']
const WORDS = ['apple', 'apricot', 'banana', 'blue', 'cherry', null]

function atom(r) {
  const n = () => Math.floor(r() * 20)
  const w = () => WORDS[Math.floor(r() * (WORDS.length - 1))]
  switch (Math.floor(r() * 11)) {
    case 0: return `a = ${n()}`
    case 1: return `a > ${n()}`
    case 2: { const x = n(); return `a BETWEEN ${x} AND ${x + n()}` }
    case 3: return `b = '${w()}'`
    case 4: return `b LIKE '${w().slice(0, 2)}%'`
    case 5: return `b IS NULL`
    case 6: return `c`
    case 7: return `NOT c`
    case 8: return `a IN (${n()}, ${n()}, ${n()})`
    case 9: return `d < ${n()}.5`
    default: return `b ILIKE '%${w().slice(-2).toUpperCase()}'`
  }
}

function where(r, depth = 0) {
  const k = Math.floor(r() * (depth > 1 ? 1 : 4))
  if (k === 0) return atom(r)
  if (k === 1) return `(${where(r, depth + 1)}) AND (${where(r, depth + 1)})`
  if (k === 2) return `(${where(r, depth + 1)}) OR (${where(r, depth + 1)})`
  return `NOT (${where(r, depth + 1)})`
}

function randomRow(r, id) {
  const b = WORDS[Math.floor(r() * WORDS.length)]
  return [id, Math.floor(r() * 20), b, r() < 0.5, (r() * 20).toFixed(2)]
}

async function randomTxn(r, t, ids) {
  const stmts = []
  const params = []
  const n = 1 + Math.floor(r() * 4)
  for (let i = 0; i < n; i++) {
    const k = r()
    if (k < 0.35 || ids.size < 3) {
      const id = 1 + Math.floor(r() * 200)
      const row = randomRow(r, id)
      stmts.push(`INSERT INTO ${t} VALUES (${row[0]}, ${row[1]}, ${row[2] === null ? 'NULL' : `'${row[2]}'`}, ${row[3]}, ${row[4]}) ON CONFLICT (id) DO UPDATE SET a = EXCLUDED.a, b = EXCLUDED.b`)
    } else if (k < 0.75) {
      const id = [...ids][Math.floor(r() * ids.size)]
      const set = [`a = ${Math.floor(r() * 20)}`, `b = ${WORDS[Math.floor(r() * WORDS.length)] === null ? 'NULL' : `'${WORDS[Math.floor(r() * 5)]}'`}`, `c = NOT c`, `d = d + 1`]
      stmts.push(`UPDATE ${t} SET ${set[Math.floor(r() * set.length)]} WHERE id = ${id}`)
    } else if (k < 0.85) {
      const id = [...ids][Math.floor(r() * ids.size)]
      stmts.push(`UPDATE ${t} SET id = id + 1000 WHERE id = ${id} AND NOT EXISTS (SELECT 1 FROM ${t} WHERE id = ${id} + 1000)`)
    } else {
      const id = [...ids][Math.floor(r() * ids.size)]
      stmts.push(`DELETE FROM ${t} WHERE id = ${id}`)
    }
  }
  await sql(`BEGIN; ${stmts.join('; ')}; COMMIT`, params.length ? params : undefined)
  const res = await sql(`SELECT id FROM ${t}`)
  ids.clear()
  for (const row of res.rows) ids.add(row.id)
}

// A client applies messages as the Shape does, and checks that nothing
// is repeated: no insert of a key it holds, no update or delete of one it
// does not.
function client(t, w, opts) {
  const rows = new Map()
  const problems = []
  let refetches = 0
  const ac = track(new AbortController())
  const stream = new ShapeStream({ url: SHAPE_URL, params: { table: t, where: w, replica: opts.replica }, liveSse: opts.sse, signal: ac.signal, onError: (e) => { problems.push(`error: ${e.message}`) } })
  stream.subscribe((msgs) => {
    for (const m of msgs) {
      const op = m.headers?.operation
      if (m.headers?.control === 'must-refetch') {
        refetches++
        rows.clear()
      }
      if (!op) continue
      const has = rows.has(m.key)
      if (op === 'insert') {
        if (has) problems.push(`insert of ${m.key}, which it holds`)
        rows.set(m.key, { ...m.value })
      } else if (op === 'update') {
        if (!has) problems.push(`update of ${m.key}, which it does not hold`)
        rows.set(m.key, { ...rows.get(m.key), ...m.value })
      } else if (op === 'delete') {
        if (!has) problems.push(`delete of ${m.key}, which it does not hold`)
        rows.delete(m.key)
      }
    }
  })
  return {
    w, opts, rows, problems, stream,
    refetches: () => refetches,
    text: () => [...rows.values()].map((v) => JSON.stringify(COLS.map((c) => norm(v[c])))).sort(),
    stop: () => { stream.unsubscribeAll(); ac.abort() },
  }
}

async function converge(t, clients, label) {
  for (const c of clients) {
    await until(`${label}: client ${c.w} ${JSON.stringify(c.opts)} to equal PostgreSQL`, async () => {
      const w2 = await pgText(`SELECT * FROM ${t} WHERE ${c.w}`, [], COLS)
      return sameRows(c.text(), w2) || (c.problems.length > 0 && 'problems')
    }, 40000)
    assert.deepEqual(c.problems, [], `${label}: ${c.w}`)
  }
}

const seed = Number(process.env.SHAPE_SEED || Date.now() % 1e9)

test(`randomized differential (seed ${seed})`, { timeout: 240000 }, async () => {
  const r = prng(seed)
  const t = unique('rnd')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, a int, b text, c bool, d numeric)`)
  const ids = new Set()
  for (let i = 1; i <= 60; i++) {
    const row = randomRow(r, i)
    await sql(`INSERT INTO ${t} VALUES ($1, $2, $3, $4, $5)`, row)
    ids.add(i)
  }
  const clients = []
  for (let i = 0; i < 10; i++) {
    clients.push(client(t, where(r), { sse: r() < 0.4, replica: r() < 0.3 ? 'full' : 'default' }))
  }
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 40; i++) await randomTxn(r, t, ids)
    await converge(t, clients, `round ${round}`)
  }
  for (const c of clients) assert.equal(c.refetches(), 0, `a must-refetch for ${c.w}`)
  // SIGKILL mid-stream: writes go on while the server is down and after.
  const writing = (async () => {
    for (let i = 0; i < 60; i++) {
      await randomTxn(r, t, ids)
      await new Promise((res) => setTimeout(res, 15))
    }
  })()
  await new Promise((res) => setTimeout(res, 150))
  await control('/kill-restart')
  await writing
  await converge(t, clients, 'after SIGKILL and restart')
  // A clean restart too.
  await control('/restart')
  for (let i = 0; i < 20; i++) await randomTxn(r, t, ids)
  await converge(t, clients, 'after a clean restart')
  for (const c of clients) {
    assert.equal(c.refetches(), 0, `a must-refetch for ${c.w} across the restarts`)
    c.stop()
  }
})

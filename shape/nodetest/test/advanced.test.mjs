import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { ShapeStream, Shape } from '@electric-sql/client'
import { sql, db, unique, follow, until, rowsText, pgText, sameRows, closeDb, SHAPE_URL, control } from '../lib.mjs'
import pg from 'pg'

after(closeDb)

const T = { timeout: 90000 }

test('changes_only with requestSnapshot, GET and POST, a transaction open across the snapshot', T, async () => {
  const t = unique('co')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, grp text, v int)`)
  await sql(`INSERT INTO ${t} SELECT i, CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END, i FROM generate_series(1, 20) i`)
  const { stream, shape, errors, stop } = follow({ table: t, log: 'changes_only' }, { log: 'changes_only' })
  await until('up-to-date', () => stream.isUpToDate)
  assert.equal(shape.currentRows.length, 0)
  // A transaction open while the snapshot is taken: its xid is in the
  // snapshot's xip_list, so its update must be delivered after it.
  const other = new pg.Client({ connectionString: process.env.DATABASE_URL })
  await other.connect()
  await other.query('BEGIN')
  await other.query(`UPDATE ${t} SET v = 1000 WHERE id = 2`)
  await shape.requestSnapshot({ where: `grp = $1`, params: { 1: 'even' }, orderBy: 'id', limit: 5 })
  assert.deepEqual(shape.currentRows.map((r) => r.id).sort((a, b) => a - b), [2, 4, 6, 8, 10])
  assert.equal(shape.currentRows.find((r) => r.id === 2).v, 2)
  await other.query('COMMIT')
  await other.end()
  await until('the open transaction', () => shape.currentRows.find((r) => r.id === 2)?.v === 1000)
  // A change committed after the snapshot to a row it holds arrives.
  await sql(`UPDATE ${t} SET v = -4 WHERE id = 4`)
  await until('the later update', () => shape.currentRows.find((r) => r.id === 4)?.v === -4)
  // POST subsets.
  await shape.requestSnapshot({ where: `id > $1 AND grp = 'odd'`, params: { 1: '15' }, orderBy: 'id', method: 'POST' })
  await until('the POST subset', () => shape.currentRows.some((r) => r.id === 17))
  assert.deepEqual(shape.currentRows.filter((r) => r.grp === 'odd').map((r) => r.id).sort((a, b) => a - b), [17, 19])
  assert.deepEqual(errors, [])
  stop()
})

test('a cold-start subset with no stream running', T, async () => {
  const t = unique('cold')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, v text)`)
  await sql(`INSERT INTO ${t} SELECT i, 'v' || i FROM generate_series(1, 10) i`)
  const ac = new AbortController()
  const stream = new ShapeStream({ url: SHAPE_URL, params: { table: t }, log: 'changes_only', signal: ac.signal })
  const { metadata, data } = await stream.fetchSnapshot({ where: 'id <= 3', orderBy: 'id' })
  assert.equal(data.length, 3)
  assert.match(metadata.xmin, /^\d+$/)
  assert.match(metadata.database_lsn, /^\d+$/)
  ac.abort()
})

test('a where the engine refuses is a 400 naming the construct', T, async () => {
  const t = unique('refuse')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, v text)`)
  const errs = []
  const ac = new AbortController()
  const stream = new ShapeStream({
    url: SHAPE_URL,
    params: { table: t, where: `id IN (SELECT 1)` },
    signal: ac.signal,
    onError: (e) => {
      errs.push(e)
    },
  })
  stream.subscribe(() => {})
  await until('the error', () => errs.length > 0)
  assert.equal(errs[0].status, 400)
  assert.match(JSON.stringify(errs[0].json), /where/)
  ac.abort()
})

test('409 after DELETE: the client refetches a new shape and converges', T, async () => {
  const t = unique('del')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, v text)`)
  await sql(`INSERT INTO ${t} VALUES (1, 'a'), (2, 'b')`)
  const msgs = []
  const { stream, shape, stop } = follow({ table: t })
  stream.subscribe((ms) => msgs.push(...ms))
  await shape.rows
  const handle = stream.shapeHandle
  const r = await fetch(`${SHAPE_URL}?handle=${encodeURIComponent(handle)}`, { method: 'DELETE' })
  assert.equal(r.status, 202)
  await sql(`INSERT INTO ${t} VALUES (3, 'c')`)
  await until('a must-refetch and the new shape', () => msgs.some((m) => m.headers?.control === 'must-refetch') && shape.currentRows.length === 3)
  assert.notEqual(stream.shapeHandle, handle)
  const cols = ['id', 'v']
  assert.deepEqual(rowsText(shape.currentRows, cols), await pgText(`SELECT * FROM ${t}`, [], cols))
  stop()
})

test('409 after the shape goes out of scope (its table changed)', T, async () => {
  const t = unique('scope')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, v text)`)
  await sql(`INSERT INTO ${t} VALUES (1, 'a')`)
  const msgs = []
  const { stream, shape, stop } = follow({ table: t })
  stream.subscribe((ms) => msgs.push(...ms))
  await shape.rows
  const handle = stream.shapeHandle
  await sql(`ALTER TABLE ${t} ALTER COLUMN v TYPE varchar(20)`)
  await sql(`INSERT INTO ${t} VALUES (2, 'b')`)
  await until('a must-refetch and the new shape', () => msgs.some((m) => m.headers?.control === 'must-refetch') && shape.currentRows.length === 2, 60000)
  assert.notEqual(stream.shapeHandle, handle)
  stop()
})

test('TRUNCATE keeps the shape live', T, async () => {
  const t = unique('trunc')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, v text)`)
  await sql(`INSERT INTO ${t} SELECT i, 'x' FROM generate_series(1, 5) i`)
  const msgs = []
  const { stream, shape, stop } = follow({ table: t })
  stream.subscribe((ms) => msgs.push(...ms))
  await shape.rows
  const handle = stream.shapeHandle
  await sql(`TRUNCATE ${t}`)
  await until('the rows gone', () => shape.currentRows.length === 0)
  await sql(`INSERT INTO ${t} VALUES (9, 'after')`)
  await until('the insert after the truncate', () => shape.currentRows.length === 1)
  assert.equal(stream.shapeHandle, handle)
  assert.ok(!msgs.some((m) => m.headers?.control === 'must-refetch'))
  stop()
})

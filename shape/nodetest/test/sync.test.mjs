import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { ShapeStream, Shape } from '@electric-sql/client'
import { sql, unique, follow, until, rowsText, pgText, sameRows, closeDb, SHAPE_URL } from '../lib.mjs'

after(closeDb)

test('initial sync of an empty table, then live inserts', { timeout: 60000 }, async () => {
  const t = unique('empty')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, title text)`)
  const { stream, shape, errors, stop } = follow({ table: t })
  const rows = await shape.rows
  assert.deepEqual(rows, [])
  await sql(`INSERT INTO ${t} VALUES (1, 'one')`)
  await until('the insert', () => shape.currentRows.length === 1)
  assert.deepEqual(shape.currentRows, [{ id: 1, title: 'one' }])
  assert.deepEqual(errors, [])
  stop()
})

test('initial sync of a small table, live by long-poll: insert, update, delete', { timeout: 60000 }, async () => {
  const t = unique('small')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, title text, n numeric, flag bool, big int8, at timestamptz, d interval)`)
  await sql(`INSERT INTO ${t} SELECT i, 'row ' || i, i * 1.5, i % 2 = 0, i * 10000000000, '2026-01-02 03:04:05+00', i * interval '1 hour' FROM generate_series(1, 20) i`)
  const cols = ['id', 'title', 'n', 'flag', 'big', 'at', 'd']
  const { stream, shape, errors, stop } = follow({ table: t })
  const rows = await shape.rows
  assert.equal(rows.length, 20)
  assert.equal(typeof rows[0].big, 'bigint')
  assert.deepEqual(rowsText(rows, cols), await pgText(`SELECT * FROM ${t}`, [], cols))
  await sql(`BEGIN; UPDATE ${t} SET title = 'changed' WHERE id <= 5; DELETE FROM ${t} WHERE id > 15; INSERT INTO ${t} (id, title) VALUES (100, NULL); COMMIT`)
  const want = await pgText(`SELECT * FROM ${t}`, [], cols)
  await until('the transaction', () => sameRows(rowsText(shape.currentRows, cols), want))
  assert.deepEqual(errors, [])
  stop()
})

test('initial sync in chunks (10,000-byte threshold)', { timeout: 60000 }, async () => {
  const t = unique('chunked')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, body text)`)
  await sql(`INSERT INTO ${t} SELECT i, repeat('x', 1000) FROM generate_series(1, 35) i`)
  const sizes = []
  const fetchClient = async (...args) => {
    const r = await fetch(...args)
    const c = r.clone()
    sizes.push((await c.text()).length)
    return r
  }
  const { stream, shape, stop } = follow({ table: t }, { fetchClient })
  const rows = await shape.rows
  assert.equal(rows.length, 35)
  // Every snapshot response but the last is 10 kB +- 2 kB.
  const full = sizes.filter((s) => s > 2)
  assert.ok(full.length >= 3, `responses: ${sizes}`)
  for (const s of full.slice(0, -1)) assert.ok(s >= 10000 && s < 12000, `chunk of ${s} bytes: ${sizes}`)
  await sql(`INSERT INTO ${t} SELECT i, repeat('y', 1000) FROM generate_series(36, 70) i`)
  await until('35 more rows', () => shape.currentRows.length === 70)
  stop()
})

test('live by SSE', { timeout: 60000 }, async () => {
  const t = unique('sse')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, v text)`)
  await sql(`INSERT INTO ${t} VALUES (1, 'a')`)
  const urls = []
  const fetchClient = async (input, init) => {
    urls.push(String(input))
    return fetch(input, init)
  }
  const { stream, shape, errors, stop } = follow({ table: t }, { liveSse: true, fetchClient })
  await shape.rows
  for (let i = 2; i <= 6; i++) {
    await sql(`INSERT INTO ${t} VALUES ($1, $2)`, [i, `v${i}`])
    await until(`row ${i}`, () => shape.currentRows.length === i)
  }
  await sql(`BEGIN; UPDATE ${t} SET v = 'u' WHERE id = 1; INSERT INTO ${t} VALUES (7, 'x'), (8, 'y'); COMMIT`)
  await until('the update and two inserts', () => shape.currentRows.length === 8 && shape.currentRows.find((r) => r.id === 1).v === 'u')
  assert.ok(urls.some((u) => u.includes('live_sse=true')), `no SSE request among ${urls}`)
  assert.deepEqual(errors, [])
  const cols = ['id', 'v']
  assert.deepEqual(rowsText(shape.currentRows, cols), await pgText(`SELECT * FROM ${t}`, [], cols))
  stop()
})

test('where, params and columns', { timeout: 60000 }, async () => {
  const t = unique('where')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, owner text, score int, secret text)`)
  await sql(`INSERT INTO ${t} SELECT i, 'u' || (i % 3), i, 's' FROM generate_series(1, 30) i`)
  const { stream, shape, stop } = follow({ table: t, where: 'owner = $1 AND score > $2', params: ['u1', '10'], columns: ['id', 'owner', 'score'] })
  const rows = await shape.rows
  const cols = ['id', 'owner', 'score']
  assert.deepEqual(rowsText(rows, cols), await pgText(`SELECT id, owner, score FROM ${t} WHERE owner = 'u1' AND score > 10`, [], cols))
  assert.ok(!('secret' in rows[0]))
  // Rows move in (insert) and out (delete) of the where.
  await sql(`UPDATE ${t} SET owner = 'u1' WHERE id IN (12, 15)`)
  await sql(`UPDATE ${t} SET score = 0 WHERE id = 13`)
  const want = await pgText(`SELECT id, owner, score FROM ${t} WHERE owner = 'u1' AND score > 10`, [], cols)
  await until('rows moving in and out', () => sameRows(rowsText(shape.currentRows, cols), want))
  stop()
})

test('replica=full sends old values and whole rows', { timeout: 60000 }, async () => {
  const t = unique('full')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, a text, b text)`)
  await sql(`INSERT INTO ${t} VALUES (1, 'a1', 'b1')`)
  const msgs = []
  const { stream, shape, stop } = follow({ table: t, replica: 'full' })
  stream.subscribe((ms) => msgs.push(...ms))
  await shape.rows
  await sql(`UPDATE ${t} SET a = 'a2' WHERE id = 1`)
  await sql(`DELETE FROM ${t} WHERE id = 1`)
  await until('the delete', () => msgs.some((m) => m.headers?.operation === 'delete'))
  const upd = msgs.find((m) => m.headers?.operation === 'update')
  assert.deepEqual(upd.value, { id: 1, a: 'a2', b: 'b1' })
  assert.deepEqual(upd.old_value, { a: 'a1' })
  assert.ok(Array.isArray(upd.headers.txids) && upd.headers.txids[0] > 0)
  const del = msgs.find((m) => m.headers?.operation === 'delete')
  assert.deepEqual(del.value, { id: 1, a: 'a2', b: 'b1' })
  stop()
})

test('offset=now starts live without history', { timeout: 60000 }, async () => {
  const t = unique('now')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY)`)
  await sql(`INSERT INTO ${t} SELECT generate_series(1, 10)`)
  const msgs = []
  const ac = new AbortController()
  const stream = new ShapeStream({ url: SHAPE_URL, params: { table: t }, offset: 'now', signal: ac.signal })
  stream.subscribe((ms) => msgs.push(...ms))
  await until('up-to-date', () => stream.isUpToDate)
  assert.equal(msgs.filter((m) => m.headers?.operation).length, 0)
  await sql(`INSERT INTO ${t} VALUES (11)`)
  await until('the new row', () => msgs.some((m) => m.headers?.operation === 'insert'))
  assert.deepEqual(msgs.filter((m) => m.headers?.operation).map((m) => m.value.id), [11])
  stream.unsubscribeAll()
  ac.abort()
})

test('domain array, enum and composite columns', { timeout: 60000 }, async () => {
  const t = unique('types')
  await sql(`CREATE DOMAIN ${t}_pos AS int CHECK (VALUE > 0)`)
  await sql(`CREATE TYPE ${t}_mood AS ENUM ('sad', 'ok', 'happy')`)
  await sql(`CREATE TYPE ${t}_pt AS (x int, y text)`)
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, ps ${t}_pos[], mood ${t}_mood NOT NULL, moods ${t}_mood[], pt ${t}_pt, tags text[])`)
  await sql(`INSERT INTO ${t} VALUES (1, '{5,9,2}', 'ok', '{sad,happy}', '(1,"a b")', '{"x y",NULL}')`)
  let schema
  const fetchClient = async (input, init) => {
    const r = await fetch(input, init)
    schema ??= r.headers.get('electric-schema')
    return r
  }
  const { stream, shape, stop } = follow({ table: t }, { fetchClient })
  const rows = await shape.rows
  const s = JSON.parse(schema)
  assert.deepEqual(s.ps, { dims: 1, type: `${t}_pos` })
  assert.deepEqual(s.mood, { not_null: true, type: `${t}_mood` })
  assert.deepEqual(s.moods, { dims: 1, type: `${t}_mood` })
  assert.deepEqual(s.pt, { type: `${t}_pt` })
  assert.deepEqual(rows[0].ps, ['5', '9', '2'])
  assert.equal(rows[0].mood, 'ok')
  assert.deepEqual(rows[0].moods, ['sad', 'happy'])
  assert.equal(rows[0].pt, '(1,"a b")')
  assert.deepEqual(rows[0].tags, ['x y', null])
  await sql(`UPDATE ${t} SET ps = '{7}', mood = 'happy', pt = '(2,z)' WHERE id = 1`)
  await until('the update', () => shape.currentRows[0]?.mood === 'happy')
  assert.deepEqual(shape.currentRows[0].ps, ['7'])
  assert.equal(shape.currentRows[0].pt, '(2,z)')
  stop()
})

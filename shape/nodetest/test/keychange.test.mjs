import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { sql, unique, follow, until, rowsText, pgText, sameRows, closeDb } from '../lib.mjs'

after(closeDb)

// An UPDATE that changes a row's primary key arrives as Electric's split:
// a delete of the old key with key_change_to, an insert of the new one
// with key_change_from. The client's rows end equal to PostgreSQL's, by
// long-poll and by SSE, replica default and full, with a where the row
// moves across and a composite key.
test('a primary-key change: the client ends with the right rows', { timeout: 90000 }, async () => {
  const t = unique('pk')
  const p = unique('pk2')
  await sql(`CREATE TABLE ${t} (id int PRIMARY KEY, title text, n int)`)
  await sql(`INSERT INTO ${t} SELECT i, 'row ' || i, i FROM generate_series(1, 10) i`)
  await sql(`CREATE TABLE ${p} (a int, b text, v text, PRIMARY KEY (a, b))`)
  await sql(`INSERT INTO ${p} VALUES (1, 'x', 'one'), (2, 'y', 'two')`)
  const cols = ['id', 'title', 'n']
  const followers = [
    ['long-poll', { table: t }, {}],
    ['SSE', { table: t }, { liveSse: true }],
    ['replica=full', { table: t, replica: 'full' }, {}],
    ['where n > 5', { table: t, where: 'n > 5' }, {}],
  ].map(([name, params, opts]) => {
    const f = follow(params, opts)
    f.name = name
    f.msgs = []
    f.stream.subscribe((ms) => f.msgs.push(...ms))
    return f
  })
  const pf = follow({ table: p })
  for (const f of [...followers, pf]) await f.shape.rows

  await sql(`UPDATE ${t} SET id = 100 WHERE id = 1`)
  await sql(`BEGIN; UPDATE ${t} SET id = 30 WHERE id = 3; UPDATE ${t} SET id = 31, title = 'moved' WHERE id = 30;
    DELETE FROM ${t} WHERE id = 4; UPDATE ${t} SET id = 4 WHERE id = 5; COMMIT`)
  await sql(`UPDATE ${t} SET id = id + 200, n = 20 - n WHERE id IN (6, 7, 8)`)
  await sql(`UPDATE ${p} SET b = 'z' WHERE a = 1`)

  for (const f of followers) {
    const where = f.name.startsWith('where') ? ' WHERE n > 5' : ''
    const want = await pgText(`SELECT * FROM ${t}${where}`, [], cols)
    await until(`${f.name}: the key changes`, () => sameRows(rowsText(f.shape.currentRows, cols), want))
    assert.deepEqual(f.errors, [], f.name)
  }
  const pcols = ['a', 'b', 'v']
  const pwant = await pgText(`SELECT * FROM ${p}`, [], pcols)
  await until('the composite key change', () => sameRows(rowsText(pf.shape.currentRows, pcols), pwant))

  // The client saw the split, as Electric sends it.
  const lp = followers[0].msgs
  const del = lp.find((m) => m.headers?.operation === 'delete' && m.headers.key_change_to)
  const ins = lp.find((m) => m.headers?.operation === 'insert' && m.headers.key_change_from)
  assert.ok(del && ins, `no split among ${JSON.stringify(lp, (k, v) => (typeof v === 'bigint' ? String(v) : v))}`)
  assert.equal(del.key, `"public"."${t}"/"1"`)
  assert.equal(del.headers.key_change_to, `"public"."${t}"/"100"`)
  assert.deepEqual(del.value, { id: 1 })
  assert.equal(ins.headers.key_change_from, del.key)
  assert.deepEqual(ins.value, { id: 100, title: 'row 1', n: 1 })
  const full = followers[2].msgs.find((m) => m.headers?.operation === 'delete' && m.headers.key_change_to)
  assert.deepEqual(full.value, { id: 1, title: 'row 1', n: 1 })
  for (const f of [...followers, pf]) f.stop()
})

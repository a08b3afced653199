// Helpers shared by the Node tests: a PostgreSQL client for writes and
// reference reads, and ways to follow a shape with the real client.
import pg from 'pg'
import { ShapeStream, Shape } from '@electric-sql/client'

export const BASE = process.env.FRESHET_URL
export const SHAPE_URL = `${BASE}/v1/shape`
export const CONTROL = process.env.CONTROL_URL

if (!BASE || !process.env.DATABASE_URL) {
  throw new Error('run through `go test ./shape -run TestElectricClient` (FRESHET_URL and DATABASE_URL unset)')
}

let client
export async function db() {
  if (!client) {
    client = new pg.Client({ connectionString: process.env.DATABASE_URL })
    await client.connect()
  }
  return client
}

export async function sql(text, params) {
  return (await db()).query(text, params)
}

export async function closeDb() {
  stopAll()
  if (client) await client.end()
  client = undefined
}

let seq = 0
// unique returns a fresh table name for a test.
export function unique(prefix) {
  seq++
  return `${prefix}_${process.pid}_${seq}`
}

// follow starts a ShapeStream and a Shape on it; errors are collected.
const live = new Set()
export function follow(params, opts = {}) {
  const errors = []
  const ac = new AbortController()
  live.add(ac)
  const stream = new ShapeStream({
    signal: ac.signal,
    url: SHAPE_URL,
    params,
    onError: (e) => {
      errors.push(e)
    },
    ...opts,
  })
  const shape = new Shape(stream)
  const stop = () => {
    stream.unsubscribeAll()
    ac.abort()
    live.delete(ac)
  }
  return { stream, shape, errors, stop }
}

// track registers an AbortController for stopAll.
export function track(ac) {
  live.add(ac)
  return ac
}

// stopAll aborts every stream still running (a failed test's), so the
// test process can exit.
export function stopAll() {
  for (const ac of live) ac.abort()
  live.clear()
}

// until polls fn every 20 ms until it returns a truthy value.
export async function until(what, fn, ms = 30000) {
  const deadline = Date.now() + ms
  let last
  for (;;) {
    try {
      last = await fn()
      if (last) return last
    } catch (e) {
      last = e
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${last instanceof Error ? last.stack : JSON.stringify(last)}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

// norm turns a value as the client parsed it back into PostgreSQL's text.
export function norm(v) {
  if (v === null || v === undefined) return null
  if (typeof v === 'boolean') return v ? 't' : 'f'
  if (typeof v === 'bigint' || typeof v === 'number') return String(v)
  if (typeof v === 'object') return JSON.stringify(v)
  return v
}

// rowsText maps the Shape's rows to sorted JSON lines of text values.
export function rowsText(rows, cols) {
  return rows
    .map((r) => JSON.stringify(cols.map((c) => norm(r[c]))))
    .sort()
}

// pgText reads the same rows from PostgreSQL as text.
export async function pgText(query, params, cols) {
  const c = await db()
  await c.query(`SET IntervalStyle = 'iso_8601'; SET extra_float_digits = 1; SET TimeZone = 'UTC'; SET DateStyle = 'ISO, DMY'`)
  const res = await c.query({ text: query, values: params, types: { getTypeParser: () => (v) => v } })
  return res.rows.map((r) => JSON.stringify(cols.map((k) => r[k]))).sort()
}

export function sameRows(a, b) {
  return JSON.stringify(a) === JSON.stringify(b)
}

export async function control(path) {
  const r = await fetch(`${CONTROL}${path}`)
  if (!r.ok) throw new Error(`control ${path}: ${r.status}`)
}

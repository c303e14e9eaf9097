// rows.mjs reads Parquet files with hyparquet, which finds each column
// chunk by its path as Spark does, and prints for each file its leaf
// columns and its rows as JSON: [{file, columns, rows}]. Values in JSON
// terms: BIGINT as a string, a timestamp or date as its ISO 8601 text, a
// decimal as hyparquet's number, a UUID as its text, other bytes as hex.
//
// Usage: node rows.mjs FILE...
// The packages are found in $EHSINK_NODE_MODULES.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const require = createRequire(join(process.env.EHSINK_NODE_MODULES, 'noop.js'))
const load = (name) => import(pathToFileURL(require.resolve(name)).href)
const { parquetMetadata, parquetReadObjects } = await load('hyparquet')
const { compressors } = await load('hyparquet-compressors')

const plain = (v) => {
  if (typeof v === 'bigint') return String(v)
  if (v instanceof Date) return v.toISOString()
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex')
  return v
}
const out = []
for (const file of process.argv.slice(2)) {
  const buf = readFileSync(file)
  const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)
  const { schema } = parquetMetadata(ab)
  const rows = await parquetReadObjects({ file: ab, compressors })
  out.push({
    file,
    columns: schema.slice(1).map((el) => el.name),
    rows: rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, plain(v)]))),
  })
}
console.log(JSON.stringify(out))

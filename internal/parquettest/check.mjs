// check.mjs reads Parquet files with two readers nobody in ehsink wrote,
// and checks every column chunk of every file against the columns the
// mapping promised and against the data read back:
//
//   - hyparquet finds a chunk's column by its path_in_schema, as Spark,
//     parquet-mr and Athena do;
//   - DuckDB's parquet_metadata() and parquet_schema() show the footer as
//     DuckDB decodes it, and its reader keeps decimals and microseconds
//     exact.
//
// Usage: node check.mjs EXPECTED.json FILE...
// EXPECTED.json is {"columns": [{name, physical, type_length, logical,
// nullable}]} (internal/parquettest.Column). It prints one JSON report on
// stdout, {files, chunks, rows, errors}, and exits 1 when errors is not
// empty. The packages are found in $EHSINK_NODE_MODULES (the project's
// .tools/node_modules, where scripts/install-tools.sh puts them).
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const modules = process.env.EHSINK_NODE_MODULES
if (!modules) {
  console.error('check.mjs: EHSINK_NODE_MODULES is not set')
  process.exit(2)
}
const require = createRequire(join(modules, 'noop.js'))
const load = (name) => import(pathToFileURL(require.resolve(name)).href)
const { parquetMetadata, parquetReadObjects } = await load('hyparquet')
const { compressors } = await load('hyparquet-compressors')
const { DuckDBInstance } = await load('@duckdb/node-api')

const [expectedPath, ...files] = process.argv.slice(2)
const expected = JSON.parse(readFileSync(expectedPath, 'utf8')).columns
const report = { files: 0, chunks: 0, rows: 0, errors: [] }
const fail = (file, msg) => report.errors.push(`${file}: ${msg}`)

// order compares two values of one column as Parquet orders them for
// statistics: numbers and bigints numerically, dates by instant, booleans
// false first, text and bytes by their unsigned bytes.
function order(a, b) {
  if (a instanceof Date) return Math.sign(a.getTime() - b.getTime())
  if (typeof a === 'boolean') return Number(a) - Number(b)
  if (typeof a === 'number' || typeof a === 'bigint') return a < b ? -1 : a > b ? 1 : 0
  return Buffer.compare(bytesOf(a), bytesOf(b))
}
function bytesOf(v) {
  if (v instanceof Uint8Array) return Buffer.from(v)
  if (typeof v === 'string') return Buffer.from(v, 'utf8')
  return Buffer.from(String(v), 'utf8')
}
// show prints a value for a message.
function show(v) {
  if (v instanceof Date) return v.toISOString()
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex')
  if (typeof v === 'bigint') return `${v}n`
  return JSON.stringify(v)
}

// span is the minimum, maximum and null count of values.
function span(values) {
  let min, max
  let nulls = 0
  for (const v of values) {
    if (v === null || v === undefined) {
      nulls++
      continue
    }
    if (min === undefined || order(v, min) < 0) min = v
    if (max === undefined || order(v, max) > 0) max = v
  }
  return { min, max, nulls }
}

// leaves walks hyparquet's flat schema list into leaf elements with paths.
function leaves(schema) {
  const out = []
  let i = 1
  function walk(prefix, count) {
    for (let n = 0; n < count; n++) {
      const el = schema[i++]
      const path = [...prefix, el.name]
      if (el.num_children) walk(path, el.num_children)
      else out.push({ el, path })
    }
  }
  walk([], schema[0].num_children)
  return out
}

function checkLogical(file, col, got) {
  const want = col.logical
  if (!want) {
    if (got) fail(file, `column ${col.name}: logical type ${JSON.stringify(got)}, want none`)
    return
  }
  for (const [k, v] of Object.entries(want)) {
    if (!got || got[k] !== v) {
      fail(file, `column ${col.name}: logical type ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
      return
    }
  }
}

// withHyparquet checks the footer as hyparquet decodes it and the
// statistics against the rows it reads back by column path.
async function withHyparquet(file, buf) {
  const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)
  const md = parquetMetadata(ab)
  const ls = leaves(md.schema)
  if (ls.length !== expected.length) {
    fail(file, `hyparquet: ${ls.length} leaf columns, want ${expected.length}`)
    return
  }
  expected.forEach((col, c) => {
    const { el, path } = ls[c]
    if (path.join('.') !== col.name) fail(file, `hyparquet: leaf ${c} is ${path.join('.')}, want ${col.name}`)
    if (el.type !== col.physical) fail(file, `column ${col.name}: physical type ${el.type}, want ${col.physical}`)
    if (col.type_length && el.type_length !== col.type_length) fail(file, `column ${col.name}: type_length ${el.type_length}, want ${col.type_length}`)
    const rep = col.nullable ? 'OPTIONAL' : 'REQUIRED'
    if (el.repetition_type !== rep) fail(file, `column ${col.name}: repetition ${el.repetition_type}, want ${rep}`)
    checkLogical(file, col, el.logical_type)
  })
  // Read by path: a chunk whose path_in_schema is not its column's makes
  // hyparquet throw, as Spark does.
  let rows
  try {
    rows = await parquetReadObjects({ file: ab, compressors })
  } catch (err) {
    fail(file, `hyparquet cannot read it: ${err.message}`)
    return
  }
  if (rows.length !== Number(md.num_rows)) fail(file, `hyparquet read ${rows.length} rows, footer says ${md.num_rows}`)
  report.rows += rows.length
  let start = 0
  md.row_groups.forEach((rg, g) => {
    const n = Number(rg.num_rows)
    const slice = rows.slice(start, start + n)
    start += n
    if (rg.columns.length !== expected.length) {
      fail(file, `row group ${g}: ${rg.columns.length} column chunks, want ${expected.length}`)
      return
    }
    rg.columns.forEach((chunk, c) => {
      report.chunks++
      const col = expected[c]
      const m = chunk.meta_data
      const where = `row group ${g} column ${c} (${col.name})`
      if ((m.path_in_schema ?? []).join('.') !== ls[c].path.join('.')) {
        fail(file, `${where}: path_in_schema ${JSON.stringify(m.path_in_schema)}, want ${JSON.stringify(ls[c].path)}`)
      }
      if (m.type !== col.physical) fail(file, `${where}: chunk type ${m.type}, want ${col.physical}`)
      if (Number(m.num_values) !== n) fail(file, `${where}: num_values ${m.num_values}, want ${n} (the row group's rows)`)
      const got = span(slice.map((r) => r[col.name]))
      const st = m.statistics
      if (!st) {
        fail(file, `${where}: no statistics`)
        return
      }
      if (Number(st.null_count) !== got.nulls) fail(file, `${where}: null_count ${st.null_count}, data has ${got.nulls}`)
      if (got.min === undefined || col.no_bounds) {
        if (st.min_value !== undefined || st.max_value !== undefined || st.min !== undefined || st.max !== undefined) {
          fail(file, `${where}: min/max statistics ${show(st.min_value)}..${show(st.max_value)} where none are due (${col.no_bounds ? 'bounds left out' : 'only nulls'})`)
        }
        return
      }
      if (st.min_value === undefined || order(st.min_value, got.min) !== 0) fail(file, `${where}: min_value ${show(st.min_value)}, data's minimum ${show(got.min)}`)
      if (st.max_value === undefined || order(st.max_value, got.max) !== 0) fail(file, `${where}: max_value ${show(st.max_value)}, data's maximum ${show(got.max)}`)
    })
  })
}

// withDuckDB checks the footer as DuckDB decodes it, and the statistics
// against the data DuckDB reads, which keeps decimals and microseconds
// exact where hyparquet turns them into doubles and Dates.
async function withDuckDB(conn, file) {
  const q = async (sql) => (await conn.runAndReadAll(sql)).getRowObjects()
  const lit = `'${file.replaceAll("'", "''")}'`
  const schema = (await q(`SELECT * FROM parquet_schema(${lit})`)).filter((r) => r.num_children === null || Number(r.num_children) === 0)
  expected.forEach((col, c) => {
    const s = schema[c]
    if (!s) {
      fail(file, `DuckDB: no leaf ${c} (${col.name})`)
      return
    }
    if (s.name !== col.name) fail(file, `DuckDB: leaf ${c} is ${s.name}, want ${col.name}`)
    if (s.type !== col.physical) fail(file, `DuckDB: column ${col.name}: physical type ${s.type}, want ${col.physical}`)
    const lt = String(s.logical_type ?? '')
    const want = col.logical
    if (want?.type === 'TIMESTAMP' && !(lt.includes('isAdjustedToUTC=1') && lt.includes(want.unit))) {
      fail(file, `DuckDB: column ${col.name}: logical type ${lt}, want a UTC-adjusted ${want.unit} timestamp`)
    }
    if (want?.type === 'DECIMAL' && (Number(s.precision) !== want.precision || Number(s.scale) !== want.scale)) {
      fail(file, `DuckDB: column ${col.name}: decimal(${s.precision},${s.scale}), want decimal(${want.precision},${want.scale})`)
    }
  })
  const chunks = await q(`SELECT row_group_id, row_group_num_rows, column_id, path_in_schema, type, num_values,
    stats_null_count, stats_min_value, stats_max_value FROM parquet_metadata(${lit}) ORDER BY row_group_id, column_id`)
  // The rows, with the row group of each, read by DuckDB; min, max and
  // null count per row group and column computed by DuckDB itself, cast
  // to the text DuckDB gives its statistics.
  let first = 0
  const groups = []
  for (const ch of chunks) {
    if (Number(ch.column_id) === 0) {
      groups.push({ first, n: Number(ch.row_group_num_rows) })
      first += Number(ch.row_group_num_rows)
    }
  }
  for (const ch of chunks) {
    const g = Number(ch.row_group_id)
    const c = Number(ch.column_id)
    const col = expected[c]
    const where = `DuckDB: row group ${g} column ${c} (${col?.name})`
    if (!col) {
      fail(file, `${where}: a column nobody expected`)
      continue
    }
    if (String(ch.path_in_schema) !== col.name) fail(file, `${where}: path_in_schema ${JSON.stringify(ch.path_in_schema)}, want ${col.name}`)
    if (ch.type !== col.physical) fail(file, `${where}: type ${ch.type}, want ${col.physical}`)
    if (Number(ch.num_values) !== groups[g].n) fail(file, `${where}: num_values ${ch.num_values}, want ${groups[g].n}`)
    const id = `"${col.name}"`
    const [agg] = await q(`SELECT CAST(min(${id}) AS VARCHAR) AS mn, CAST(max(${id}) AS VARCHAR) AS mx,
      count(*) - count(${id}) AS nulls FROM read_parquet(${lit}, file_row_number = true)
      WHERE file_row_number >= ${groups[g].first} AND file_row_number < ${groups[g].first + groups[g].n}`)
    if (Number(ch.stats_null_count) !== Number(agg.nulls)) fail(file, `${where}: null_count ${ch.stats_null_count}, data has ${agg.nulls}`)
    if (col.no_bounds) {
      if (ch.stats_min_value !== null || ch.stats_max_value !== null) fail(file, `${where}: min/max ${ch.stats_min_value}..${ch.stats_max_value} where bounds are left out`)
      continue
    }
    if (col.physical === 'BOOLEAN') continue // DuckDB prints boolean statistics as 0/1 and data as false/true
    if (ch.stats_min_value !== agg.mn) fail(file, `${where}: min ${JSON.stringify(ch.stats_min_value)}, data's minimum ${JSON.stringify(agg.mn)}`)
    if (ch.stats_max_value !== agg.mx) fail(file, `${where}: max ${JSON.stringify(ch.stats_max_value)}, data's maximum ${JSON.stringify(agg.mx)}`)
  }
}

const instance = await DuckDBInstance.create(':memory:')
const conn = await instance.connect()
for (const file of files) {
  const before = report.errors.length
  try {
    await withHyparquet(file, readFileSync(file))
    await withDuckDB(conn, file)
  } catch (err) {
    fail(file, `${err.stack ?? err}`)
  }
  if (report.errors.length === before) report.files++
}
conn.closeSync?.()
process.stdout.write(JSON.stringify(report) + '\n')
process.exit(report.errors.length ? 1 : 0)

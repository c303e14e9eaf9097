// query.mjs runs one SQL query in DuckDB (@duckdb/node-api) and prints its
// rows as a JSON array of objects, each value in DuckDB's JSON form
// (getRowObjectsJson: BIGINT and DECIMAL as strings, INTEGER as a number,
// structs and lists as objects and arrays).
//
// Usage: node query.mjs SQL
// The packages are found in $EHSINK_NODE_MODULES.
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const require = createRequire(join(process.env.EHSINK_NODE_MODULES, 'noop.js'))
const { DuckDBInstance } = await import(pathToFileURL(require.resolve('@duckdb/node-api')).href)
const db = await DuckDBInstance.create(':memory:')
const conn = await db.connect()
const reader = await conn.runAndReadAll(process.argv[2])
const rows = reader.getRowObjectsJson()
console.log(JSON.stringify(rows))

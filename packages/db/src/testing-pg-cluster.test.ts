import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";
import pg from "pg";
import { postgresBinDir, startPrivateCluster } from "./testing-pg-cluster.ts";

const query = async (url: string, sql: string) => {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
};

test("a private cluster starts, stops (the data survives an immediate stop) and is removed", {
  skip: !postgresBinDir() && "no PostgreSQL server binaries",
}, async () => {
  const cluster = await startPrivateCluster();
  try {
    assert.notEqual(cluster.port, 5432);
    const url = await cluster.database("faults_probe");
    await query(url, "create table t (n int); insert into t values (1)");
    cluster.stop("immediate");
    await assert.rejects(query(url, "select 1"), /ECONNREFUSED/);
    cluster.start();
    assert.deepEqual(await query(url, "select n from t"), [{ n: 1 }]);
    assert.equal(await cluster.database("faults_probe"), url, "asking again reuses the database");
  } finally {
    cluster.destroy();
  }
  assert.equal(existsSync(cluster.dir), false);
});

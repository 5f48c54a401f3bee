// test-timeout: 240000
// The official e2b SDK (2.51.0, unchanged) against the platform on 127.0.0.1,
// set up only with its documented settings for a self-hosted deployment
// (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY): the real compute domain with
// the local driver behind the E2B listener, identity's double verifying the
// platform API key.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { KyselySandboxStore } from "@platform/compute";
import { CommandExitError, NotFoundError, Sandbox, SandboxError } from "e2b";
import { type E2bStack, startE2bStack } from "./testing/e2b-stack.ts";

let stack: E2bStack;
let key: { token: string; orgId: string };

before(async () => {
  stack = await startE2bStack("sdk");
  key = stack.identity.apiKey(["read", "sessions:run"]);
  process.env.E2B_API_URL = stack.compat.url;
  process.env.E2B_SANDBOX_URL = stack.compat.url;
  process.env.E2B_API_KEY = key.token;
});

after(async () => {
  await stack?.close();
});

describe("the e2b SDK on our sandboxes", () => {
  let sbx: Sandbox;

  test("Sandbox.create makes an ordinary compute sandbox of the caller's organization", async () => {
    const t0 = performance.now();
    sbx = await Sandbox.create({ timeoutMs: 120_000, metadata: { purpose: "sdk-test" } });
    console.log(`create: ${(performance.now() - t0).toFixed(0)} ms`);
    const record = await new KyselySandboxStore(stack.compute.database).get(sbx.sandboxId);
    assert.equal(record?.tenantId, key.orgId, "the sandbox belongs to the API key's organization");
    assert.equal(record?.mountPath, "/home/user");
    assert.equal(record?.maxRuntimeMs, 24 * 3_600_000, "compute's deadline is E2B's longest sandbox life");
    const view = await stack.compute.domain.describeSandbox(sbx.sandboxId);
    assert.ok(["STARTING", "READY"].includes(view.status), view.status);
    const info = await sbx.getInfo();
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.deepEqual(info.metadata, { purpose: "sdk-test" });
    assert.equal(info.state, "running");
  });

  test("commands.run streams stdout and stderr and reports the exit code", async () => {
    const out: string[] = [];
    const err: string[] = [];
    const t0 = performance.now();
    const r = await sbx.commands.run("echo one; echo two >&2; echo three; pwd", {
      onStdout: (d) => {
        out.push(d);
      },
      onStderr: (d) => {
        err.push(d);
      },
    });
    console.log(`commands.run: ${(performance.now() - t0).toFixed(0)} ms`);
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, "one\nthree\n/home/user\n");
    assert.equal(r.stderr, "two\n");
    assert.equal(out.join(""), r.stdout, "onStdout saw the streamed output");
    assert.equal(err.join(""), "two\n");
    const envs = await sbx.commands.run("echo $GREETING", { envs: { GREETING: "hi" }, cwd: "/home/user" });
    assert.equal(envs.stdout, "hi\n");
  });

  test("a non-zero exit and a command not found are CommandExitError with the code and stderr", async () => {
    await assert.rejects(sbx.commands.run("echo bad >&2; exit 3"), (e: unknown) => {
      assert.ok(e instanceof CommandExitError, String(e));
      assert.equal(e.exitCode, 3);
      assert.equal(e.stderr, "bad\n");
      return true;
    });
    await assert.rejects(sbx.commands.run("no-such-command-xyz"), (e: unknown) => {
      assert.ok(e instanceof CommandExitError, String(e));
      assert.equal(e.exitCode, 127);
      assert.match(e.stderr, /no-such-command-xyz: command not found/);
      return true;
    });
  });

  test("a background command: listed, connected to from a second handle, killed", async () => {
    const h = await sbx.commands.run("for i in 1 2 3; do echo tick $i; sleep 0.3; done; echo done", {
      background: true,
    });
    const listed = await sbx.commands.list();
    assert.ok(
      listed.some((p) => p.pid === h.pid),
      `pid ${h.pid} in ${JSON.stringify(listed)}`,
    );
    const seen: string[] = [];
    const again = await sbx.commands.connect(h.pid, {
      onStdout: (d) => {
        seen.push(d);
      },
    });
    const result = await again.wait();
    assert.equal(result.exitCode, 0);
    assert.match(seen.join(""), /done\n$/, "the connected handle streams the output after connecting");
    assert.equal((await h.wait()).exitCode, 0);

    const long = await sbx.commands.run("sleep 60", { background: true });
    assert.equal(await sbx.commands.kill(long.pid), true);
    await assert.rejects(long.wait(), (e: unknown) => {
      assert.ok(e instanceof CommandExitError, String(e));
      assert.equal(e.error, "signal: killed");
      return true;
    });
    const ps = await sbx.commands.run("cat /proc/[0-9]*/cmdline | tr '\\0' ' '");
    assert.doesNotMatch(ps.stdout, /sleep 60/, "the killed command is gone from the sandbox");
    assert.equal(await sbx.commands.kill(long.pid), false, "a finished command is not found");
  });

  test("stdin: sendStdin reaches the command in order, closeStdin ends it; a command without stdin refuses input", async () => {
    const h = await sbx.commands.run("cat; echo done", { background: true, stdin: true });
    await h.sendStdin("hello ");
    await sbx.commands.sendStdin(h.pid, "from stdin\n");
    // Larger than compute's 64 KiB a call: cut into its chunks, in order.
    const big = "0123456789abcdef".repeat(9000);
    await sbx.commands.sendStdin(h.pid, `${big}\n`);
    await sbx.commands.closeStdin(h.pid);
    const r = await h.wait();
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, `hello from stdin\n${big}\ndone\n`);
    await assert.rejects(sbx.commands.sendStdin(h.pid, "late"), (e: unknown) => {
      assert.ok(e instanceof NotFoundError, String(e));
      return true;
    });
    const plain = await sbx.commands.run("sleep 2", { background: true });
    await assert.rejects(sbx.commands.sendStdin(plain.pid, "x"), /was not started with stdin/);
    await plain.wait();
  });

  test("pty: create runs an interactive shell on a terminal; sendInput types, resize is seen, exit ends it", async () => {
    let out = "";
    const dec = new TextDecoder();
    const term = await sbx.pty.create({
      rows: 24,
      cols: 80,
      onData: (d) => {
        out += dec.decode(d, { stream: true });
      },
    });
    const seen = async (re: RegExp) => {
      const until = Date.now() + 20_000;
      while (!re.test(out)) {
        assert.ok(Date.now() < until, `no ${re} in ${JSON.stringify(out)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const enc = new TextEncoder();
    await sbx.pty.sendInput(term.pid, enc.encode("stty size; tty -s && echo on-a-tty\n"));
    await seen(/24 80\r\n(.|\r|\n)*on-a-tty/);
    await sbx.pty.resize(term.pid, { rows: 40, cols: 120 });
    await sbx.pty.sendInput(term.pid, enc.encode("stty size; exit 0\n"));
    const r = await term.wait();
    assert.equal(r.exitCode, 0);
    assert.match(out, /40 120\r\n/);
  });

  test("files: write, read, list, exists, makeDir, rename, remove; a missing file is NotFoundError", async () => {
    const info = await sbx.files.write("/home/user/notes/hello.txt", "hello from the SDK\n");
    assert.equal(info.path, "/home/user/notes/hello.txt");
    assert.equal(await sbx.files.read("notes/hello.txt"), "hello from the SDK\n");
    const seen = (await sbx.commands.run("cat /home/user/notes/hello.txt")).stdout;
    assert.equal(seen, "hello from the SDK\n", "the command sees the written file");
    const bytes = await sbx.files.read("/home/user/notes/hello.txt", { format: "bytes" });
    assert.equal(bytes.length, 19);
    const entries = await sbx.files.list("/home/user/notes");
    assert.deepEqual(
      entries.map((e) => [e.name, e.type, e.path]),
      [["hello.txt", "file", "/home/user/notes/hello.txt"]],
    );
    assert.equal(await sbx.files.exists("/home/user/notes/hello.txt"), true);
    assert.equal(await sbx.files.makeDir("/home/user/sub/dir"), true);
    assert.equal(await sbx.files.makeDir("/home/user/sub/dir"), false, "an existing directory");
    const moved = await sbx.files.rename("/home/user/notes/hello.txt", "/home/user/sub/dir/moved.txt");
    assert.equal(moved.path, "/home/user/sub/dir/moved.txt");
    assert.equal(await sbx.files.exists("/home/user/notes/hello.txt"), false);
    await sbx.files.remove("/home/user/sub");
    assert.equal(await sbx.files.exists("/home/user/sub/dir/moved.txt"), false);
    await assert.rejects(sbx.files.read("/home/user/missing.txt"), (e: unknown) => {
      assert.ok(e instanceof NotFoundError, `${(e as Error).name}: ${(e as Error).message}`);
      return true;
    });
    await assert.rejects(sbx.files.read("/etc/passwd"), (e: unknown) => e instanceof SandboxError);
  });

  test("files.watchDir (polled): creates, writes, removes and, recursive, a new subdirectory's files", async () => {
    await sbx.files.makeDir("/home/user/watched");
    const events: string[] = [];
    const handle = await sbx.files.watchDir(
      "/home/user/watched",
      (e) => {
        events.push(`${e.type} ${e.name}`);
      },
      { recursive: true },
    );
    const seen = async (event: string) => {
      const until = Date.now() + 15_000;
      while (!events.includes(event)) {
        assert.ok(Date.now() < until, `no ${event} in ${JSON.stringify(events)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await sbx.files.write("/home/user/watched/a.txt", "one");
    await seen("create a.txt");
    await sbx.commands.run("echo more >> /home/user/watched/a.txt");
    await seen("write a.txt");
    await sbx.commands.run("mkdir /home/user/watched/sub && echo b > /home/user/watched/sub/b.txt");
    await seen("create sub");
    await seen("create sub/b.txt");
    await sbx.files.remove("/home/user/watched/a.txt");
    await seen("remove a.txt");
    await handle.stop();
    const unwatched = events.length;
    await sbx.files.write("/home/user/watched/c.txt", "after stop");
    await new Promise((r) => setTimeout(r, 1200));
    assert.equal(events.length, unwatched, "no event after stop");
    await assert.rejects(
      sbx.files.watchDir("/home/user/watched/sub/b.txt", () => {}),
      /not a directory/,
    );
  });

  test("envd's CreateWatcher / GetWatcherEvents / RemoveWatcher (the Python SDK's polling watch), over Connect JSON", async () => {
    const envd = {
      "e2b-sandbox-id": sbx.sandboxId,
      "x-access-token": (sbx as unknown as { envdAccessToken: string }).envdAccessToken,
      "content-type": "application/json",
    };
    const call = async (method: string, body: object) => {
      const res = await fetch(`${stack.compat.url}/filesystem.Filesystem/${method}`, {
        method: "POST",
        headers: envd,
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    await sbx.files.makeDir("/home/user/polled");
    const made = await call("CreateWatcher", { path: "/home/user/polled" });
    assert.equal(made.status, 200, JSON.stringify(made.body));
    const watcherId = made.body.watcherId as string;
    assert.deepEqual((await call("GetWatcherEvents", { watcherId })).body, {});
    await sbx.files.write("/home/user/polled/x.txt", "x");
    const got = await call("GetWatcherEvents", { watcherId });
    assert.deepEqual(got.body.events, [{ name: "x.txt", type: "EVENT_TYPE_CREATE" }]);
    assert.equal((await call("RemoveWatcher", { watcherId })).status, 200);
    assert.equal((await call("GetWatcherEvents", { watcherId })).status, 404);
  });

  test("Sandbox.list shows the organization's sandboxes; another organization's key sees none of them", async () => {
    const mine = await Sandbox.list({ query: { metadata: { purpose: "sdk-test" } } }).nextItems();
    assert.deepEqual(
      mine.map((s) => s.sandboxId),
      [sbx.sandboxId],
    );
    const other = stack.identity.apiKey(["sessions:run"]);
    const theirs = await Sandbox.list({ apiKey: other.token }).nextItems();
    assert.deepEqual(theirs, []);
    await assert.rejects(Sandbox.connect(sbx.sandboxId, { apiKey: other.token }), (e: unknown) => {
      assert.ok(e instanceof NotFoundError, String(e));
      return true;
    });
  });

  test("pause and connect map onto compute's PauseSandbox and ResumeSandbox", async () => {
    await sbx.files.write("/home/user/kept.txt", "kept");
    assert.equal(await sbx.pause(), true);
    assert.equal((await stack.compute.domain.describeSandbox(sbx.sandboxId)).status, "PAUSED");
    const resumed = await Sandbox.connect(sbx.sandboxId);
    assert.equal((await stack.compute.domain.describeSandbox(sbx.sandboxId)).status, "READY");
    assert.equal(await resumed.files.read("/home/user/kept.txt"), "kept");
  });

  test("kill: the sandbox is destroyed in compute and the SDK reports it gone", async () => {
    await sbx.setTimeout(300_000);
    assert.equal(await sbx.kill(), true);
    assert.equal((await stack.compute.domain.describeSandbox(sbx.sandboxId)).status, "DESTROYED");
    assert.equal(await Sandbox.kill(sbx.sandboxId), false, "a second kill finds nothing");
    await assert.rejects(Sandbox.getInfo(sbx.sandboxId), (e: unknown) => {
      assert.ok(e instanceof NotFoundError, String(e));
      return true;
    });
    await assert.rejects(sbx.commands.run("echo hi"), (e: unknown) => {
      assert.ok(e instanceof SandboxError, String(e));
      assert.match((e as Error).message, /not running/);
      return true;
    });
    await assert.rejects(sbx.files.read("/home/user/kept.txt"), (e: unknown) => {
      assert.match((e as Error).message, /not running/);
      return true;
    });
  });
});

describe("what the SDK is refused, in its own errors", () => {
  test("no API key, an unknown key, a key without sessions:run", async () => {
    await assert.rejects(Sandbox.create({ apiKey: "sk_test_unknown" }), (e: unknown) => {
      assert.equal((e as Error).name, "AuthenticationError");
      return true;
    });
    const readOnly = stack.identity.apiKey(["read"]);
    await assert.rejects(Sandbox.create({ apiKey: readOnly.token }), /403: this API key lacks the sessions:run scope/);
  });

  test("allowInternetAccess and network.allowOut reach compute as its network policy; other network options are refused", async () => {
    // This stack's local driver has no egress proxy: compute validates the policy, then refuses a network at all.
    await assert.rejects(
      Sandbox.create({ timeoutMs: 60_000, allowInternetAccess: true }),
      /400: the local driver cannot give sandboxes a network/,
    );
    await assert.rejects(
      Sandbox.create({ timeoutMs: 60_000, network: { allowOut: ["example.com", "10.1.2.0/24"] } }),
      /400: the local driver cannot give sandboxes a network/,
    );
    await assert.rejects(
      Sandbox.create({ timeoutMs: 60_000, network: { allowOut: ["bad domain!"] } }),
      /400: .*bad domain!/,
      "compute's own validation names the entry",
    );
    await assert.rejects(
      Sandbox.create({ timeoutMs: 60_000, network: { denyOut: ["example.com"] } }),
      /501: network options denyOut are not served/,
    );
  });

  test("the timeout kills the sandbox in compute; setTimeout moves it", async () => {
    const short = await Sandbox.create({ timeoutMs: 1500 });
    const kept = await Sandbox.create({ timeoutMs: 1500 });
    await kept.setTimeout(60_000);
    await new Promise((r) => setTimeout(r, 2500));
    await assert.rejects(Sandbox.getInfo(short.sandboxId), (e: unknown) => e instanceof NotFoundError);
    assert.equal((await stack.compute.domain.describeSandbox(short.sandboxId)).status, "DESTROYED");
    assert.equal((await kept.getInfo()).state, "running");
    assert.equal((await kept.commands.run("echo alive")).stdout, "alive\n");
    await kept.kill();
  });

  test("envd calls need the sandbox's access token", async () => {
    const sbx = await Sandbox.create({ timeoutMs: 60_000 });
    try {
      const res = await fetch(`${stack.compat.url}/files?path=/home/user/x`, {
        headers: { "E2b-Sandbox-Id": sbx.sandboxId, "X-Access-Token": "ea_wrong" },
      });
      assert.equal(res.status, 401);
      const none = await fetch(`${stack.compat.url}/files?path=/home/user/x`, {
        headers: { "E2b-Sandbox-Id": sbx.sandboxId },
      });
      assert.equal(none.status, 401);
    } finally {
      await sbx.kill();
    }
  });

  test("a template other than base, template builds: a clear message", async () => {
    await assert.rejects(Sandbox.create("my-dockerfile-template"), /template "my-dockerfile-template" is not served/);
  });
});

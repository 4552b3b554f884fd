// Airlock JavaScript code context driver. The agent starts node (with
// --expose-internals, for the REPL's top-level-await rewriting) under a
// bootstrap that reads this source as one JSON line from fd 3 and runs it
// as a function of require. Same protocol as the Python driver
// (docs/AGENT_PROTOCOL.md, "Code contexts"), over fd 3: commands in,
// events out. Code runs in the main context, like the node REPL, so
// top-level declarations persist from run to run.
'use strict';

const fs = require('fs');
const path = require('path');
const util = require('util');
const vm = require('vm');
const Module = require('module');

const CTL = 3;
const DRIVER_FILE = 'airlock-driver';

let rewriteAwait = null;
try {
  rewriteAwait = require('internal/repl/await').processTopLevelAwait;
} catch {
  // Without the REPL's rewriting, code with top-level await is run in an
  // async function: it works, but its declarations do not persist.
}

function send(obj) {
  const b = Buffer.from(JSON.stringify(obj) + '\n');
  let off = 0;
  while (off < b.length) {
    try {
      off += fs.writeSync(CTL, b, off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
    }
  }
}

// stdout and stderr writes become events, in order with results; a child
// process writing to fds 1 and 2 still reaches the agent's pipes.
function channel(kind) {
  return function write(chunk, encoding, cb) {
    if (typeof encoding === 'function') {
      cb = encoding;
      encoding = undefined;
    }
    const b = Buffer.isBuffer(chunk) || chunk instanceof Uint8Array
      ? Buffer.from(chunk)
      : Buffer.from(String(chunk), typeof encoding === 'string' ? encoding : 'utf8');
    if (b.length) send({ type: kind, data: b.toString('base64') });
    if (typeof cb === 'function') process.nextTick(cb);
    return true;
  };
}
process.stdout.write = channel('stdout');
process.stderr.write = channel('stderr');

// Errors thrown from callbacks after a run must not kill the context.
process.on('uncaughtException', (e) => {
  process.stderr.write('Uncaught ' + (e && e.stack ? e.stack : String(e)) + '\n');
});
process.on('unhandledRejection', (e) => {
  process.stderr.write('Unhandled rejection: ' + (e && e.stack ? e.stack : String(e)) + '\n');
});

globalThis.require = Module.createRequire(path.join(process.cwd(), '[airlock]'));

let count = 0;
let interrupt = null; // set while a run awaits a promise

process.on('SIGINT', () => {
  if (interrupt) interrupt();
});

function cleanStack(stack) {
  return String(stack)
    .split('\n')
    .filter((l) => !l.includes(DRIVER_FILE) && !/\(node:|at node:/.test(l))
    .join('\n');
}

function errorOf(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    return { name: e.name || 'Error', value: String(e.message || ''), traceback: cleanStack(e.stack || '') };
  }
  return { name: 'Error', value: 'Uncaught ' + util.inspect(e), traceback: '' };
}

function compile(code, filename) {
  let rewritten = null;
  if (/\bawait\b/.test(code)) {
    try {
      rewritten = rewriteAwait ? rewriteAwait(code) : null;
    } catch {
      rewritten = null; // not parseable: let vm report the syntax error
    }
    if (!rewritten && !rewriteAwait) {
      try {
        new vm.Script(code, { filename });
      } catch {
        rewritten = '(async () => {\n' + code + '\n})()';
      }
    }
  }
  return { script: new vm.Script(rewritten || code, { filename }), async: !!rewritten };
}

async function run(cmd) {
  count++;
  const filename = `<cell ${count}>`;
  const env = cmd.env || {};
  const saved = {};
  for (const k of Object.keys(env)) {
    saved[k] = process.env[k];
    process.env[k] = env[k];
  }
  try {
    let compiled;
    try {
      compiled = compile(cmd.code || '', filename);
    } catch (e) {
      send({ type: 'error', error: errorOf(e) });
      return;
    }
    let value = compiled.script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (compiled.async) {
      const stop = new Promise((resolve, reject) => {
        interrupt = () => reject(new Error('Script execution was interrupted by `SIGINT`'));
      });
      const done = await Promise.race([value, stop]);
      value = done && typeof done === 'object' && 'value' in done ? done.value : undefined;
    }
    if (value !== undefined) {
      send({ type: 'result', result: { 'text/plain': util.inspect(value) }, main: true });
    }
  } catch (e) {
    send({ type: 'error', error: errorOf(e) });
  } finally {
    interrupt = null;
    for (const k of Object.keys(saved)) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  }
}

function readCommands() {
  let buf = Buffer.alloc(0);
  const chunk = Buffer.alloc(1 << 16);
  const loop = () => {
    const nl = buf.indexOf(10);
    if (nl >= 0) {
      const line = buf.subarray(0, nl).toString();
      buf = buf.subarray(nl + 1);
      let cmd;
      try {
        cmd = JSON.parse(line);
      } catch (e) {
        send({ type: 'error', error: errorOf(e) });
        send({ type: 'end' });
        setImmediate(loop);
        return;
      }
      run(cmd).finally(() => {
        send({ type: 'end' });
        setImmediate(loop);
      });
      return;
    }
    fs.read(CTL, chunk, 0, chunk.length, null, (err, n) => {
      if (err || n === 0) process.exit(0); // the agent is gone
      buf = Buffer.concat([buf, chunk.subarray(0, n)]);
      loop();
    });
  };
  loop();
}

// Keep the event loop alive while a run awaits a promise nothing else
// holds up; the driver ends when the agent closes fd 3.
setInterval(() => {}, 1 << 30);
send({ type: 'ready', pid: process.pid });
readCommands();

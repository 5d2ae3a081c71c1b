// Processes the benchmark starts: every one is tracked and ended (with its descendants) when
// it is stopped or when the benchmark exits, whatever the reason.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const live = new Set();

function killQuietly(pid, signal) {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Every process whose parent chain leads to `pid` (read from /proc). */
export function descendants(pid) {
  const parent = new Map();
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parent.set(Number(e), ppid);
    } catch {
      // gone meanwhile
    }
  }
  const out = [];
  const want = new Set([pid]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [p, pp] of parent) {
      if (want.has(pp) && !want.has(p)) {
        want.add(p);
        out.push(p);
        grew = true;
      }
    }
  }
  return out;
}

/** CPU time (ns) a process has run so far, all its threads (the sum of /proc/PID/task/TID/schedstat). */
export function cpuNs(pid) {
  let total = 0;
  try {
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      try {
        total += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // thread ended meanwhile
      }
    }
  } catch {
    return 0;
  }
  return total;
}

/** Resident set size of a process in bytes (0 when it is gone). */
export function rssOf(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

process.on('exit', () => {
  for (const t of live) {
    for (const d of descendants(t.pid)) killQuietly(d, 'SIGKILL');
    killQuietly(-t.pid, 'SIGKILL') || killQuietly(t.pid, 'SIGKILL');
  }
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));

/** A free TCP port on 127.0.0.1 (for peers that cannot be told to pick one). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * Start a tracked process in its own group. `ready` is a regex tested against stdout and
 * stderr lines; resolves with the first match once it appears.
 */
export async function startProcess(name, command, args, { env, cwd, ready, timeoutMs = 30_000 } = {}) {
  const proc = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const tail = [];
  const t = { name, proc, pid: proc.pid, tail };
  live.add(t);
  const exited = new Promise((r) => proc.once('exit', (code, signal) => r({ code, signal })));
  t.exited = exited;
  const match = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not become ready in ${timeoutMs} ms:\n${tail.join('\n')}`)), timeoutMs);
    const onLine = (line) => {
      tail.push(line);
      if (tail.length > 40) tail.shift();
      const m = ready?.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    for (const stream of [proc.stdout, proc.stderr]) {
      let buf = '';
      stream.setEncoding('utf8');
      stream.on('data', (d) => {
        buf += d;
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          onLine(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
        if (buf.length > 65536) buf = buf.slice(-4096);
      });
    }
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${tail.join('\n')}`));
    });
  });
  t.stop = async () => {
    if (!live.has(t)) return;
    const kids = descendants(t.pid);
    if (proc.exitCode === null && proc.signalCode === null) {
      killQuietly(t.pid, 'SIGTERM');
      const done = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 5000))]);
      if (!done) killQuietly(-t.pid, 'SIGKILL') || killQuietly(t.pid, 'SIGKILL');
      await exited;
    }
    // Children in their own process groups (the hub's upstreams) must not outlive the test.
    await new Promise((r) => setTimeout(r, 100));
    for (const d of kids) killQuietly(d, 'SIGKILL');
    live.delete(t);
  };
  if (!ready) match.catch(() => undefined); // nothing waits for a ready line
  else t.match = await match.catch(async (err) => {
    await t.stop();
    throw err;
  });
  return t;
}

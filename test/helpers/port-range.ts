import { createServer, type Server } from 'node:http';

/**
 * Loopback ports the tests that need a fixed one take theirs from: outside the ephemeral range, so
 * no listen(0) or outgoing connection elsewhere takes one while the test has it down.
 */
export const TEST_PORTS = { from: 24000, to: 24999 };

/** Listens `server` on 127.0.0.1 at a free port of TEST_PORTS (tried from a random one); resolves to it. */
export async function listenInRange(server: Server): Promise<number> {
  const span = TEST_PORTS.to - TEST_PORTS.from + 1;
  const start = Math.floor(Math.random() * span);
  for (let i = 0; i < span; i++) {
    const port = TEST_PORTS.from + ((start + i) % span);
    const ok = await new Promise<boolean>((resolve) => {
      const onError = (): void => resolve(false);
      server.once('error', onError);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', onError);
        resolve(true);
      });
    });
    if (ok) return port;
  }
  throw new Error(`no free port in ${TEST_PORTS.from}-${TEST_PORTS.to}`);
}

/** A port of TEST_PORTS that was free a moment ago (for a process the test starts on it). */
export async function freePortInRange(): Promise<number> {
  const s = createServer();
  const port = await listenInRange(s);
  await new Promise((r) => s.close(r));
  return port;
}

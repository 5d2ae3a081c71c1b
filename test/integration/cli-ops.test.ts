/**
 * The operator commands through the real built binary: init (starter and --from Claude Desktop,
 * VS Code and Cursor files), servers, doctor and tools --format, with and without a daemon.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, runCliBatch, type CliRun } from '../helpers/cli.js';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { freePortInRange } from '../helpers/port-range.js';

const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';
const SDK2 = 'test/fixtures/servers/sdk2-modern-server.mjs';

type Json = Record<string, any>;

const run = runCli;

const tmp = (p: string) => mkdtempSync(join(tmpdir(), `switchyard-${p}-`));

// The first three blocks run their CLI processes side by side (each test its own folders, no
// daemon, no timing): the two blocks after them share a config, a blocked port or a daemon.
describe.concurrent('exit codes and errors of the CLI itself', () => {
  it('a usage error exits 2 in one line naming it and where the help is; a config init cannot write is one line and exit 1, no stack, and no hang', async () => {
    // The real process for one usage error and the failure below; the other cases in one process
    // (runCliBatch: each its own argv, output and exit code). yargs' own errors printed the whole
    // help (40 lines) before their line, which called a mistyped command an "argument".
    const real = await runCli(['bogus']);
    expect([real.code, real.stdout, real.stderr], 'bogus').toEqual([2, '', 'switchyard: unknown command "bogus" (see switchyard --help)\n']);
    const broken = mkdtempSync(join(tmpdir(), 'switchyard-cli-broken-'));
    writeFileSync(join(broken, 'hub.config.json'), JSON.stringify({ servers: { x: { command: 3 } } }));
    const usage: [string[], string][] = [
      [['start', '--bogus'], 'switchyard start: unknown option --bogus (see switchyard start --help)'],
      [['keys', 'add'], 'switchyard keys add: missing <principal> (see switchyard keys add --help)'],
      [['ledger', 'bogus'], 'switchyard ledger: unknown command "bogus" (see switchyard ledger --help)'],
      [['servers', 'restart', 'a', 'b'], 'switchyard servers restart: unknown argument "b" (see switchyard servers restart --help)'],
      [['ledger', 'query', '-xy', '--bogus-thing=1'], 'switchyard ledger query: unknown options -x, -y, --bogus-thing (see switchyard ledger query --help)'],
      [['ledger', 'prune'], 'switchyard ledger prune: --before must be given (see switchyard ledger prune --help)'],
    ];
    const subs = ['diff', 'approve', 'export'];
    const refused = [['diff', 'x', '--format', 'openai'], ['diff', 'x', '--group', 'g'], ['approve', '--server', 's', '--url', 'http://127.0.0.1:1']];
    const unknown = [['--bogus'], ['--bogus', 'servers'], ['ledger', '--bogus'], ['keys', '--bogus'], ['config', '--bogus']];
    const runs = await runCliBatch([
      ...usage.map(([args]) => ({ args })),
      { args: ['ledger', 'query', '--outcome', 'bogus'] },
      { args: ['tools', 'export', '--format', 'openai', '--local'], cwd: broken },
      ...subs.map((sub) => ({ args: ['tools', sub, '--help'] })),
      ...refused.map((args) => ({ args: ['tools', ...args] })),
      { args: ['start', '--help'] },
      // An unknown option is named wherever it stands, also with no command (or subcommand) after it.
      ...unknown.map((args) => ({ args })),
      // An empty --key is no key at all: it overrode SWITCHYARD_API_KEY and sent none.
      { args: ['connect', '--key', ''], env: { SWITCHYARD_API_KEY: 'k' } },
      // yargs' own parse error (an option that requires a value, given none) is a usage error too, not exit 1.
      { args: ['ledger', 'query', '--since'] },
      // No subcommand at all is no mistake in one word: the help lists those there are.
      { args: ['ledger'] },
    ]);
    for (const [args, line] of usage) {
      const r = runs.shift()!;
      expect([r.code, r.stdout, r.stderr], args.join(' ')).toEqual([2, '', `${line}\n`]);
    }
    // A misspelt filter value is a usage error, not an empty answer; a broken config is 2 for export too.
    const bogus = runs.shift()!;
    expect([bogus.code, bogus.stderr]).toEqual([2, expect.stringMatching(/^switchyard ledger query: --outcome must be one of "in_flight", "ok", .*; got "bogus" \(see switchyard ledger query --help\)\n$/)]);
    const exported = runs.shift()!;
    expect([exported.code, exported.stderr]).toEqual([2, expect.stringMatching(/^switchyard tools export: hub\.config\.json: /)]);
    // Subcommands' help names each option once (they are declared by their parent too).
    const helps = new Map<string, string>();
    for (const sub of subs) {
      const help = runs.shift()!.stdout;
      helps.set(sub, help);
      expect(help, sub).toMatch(/-c, --config/);
      expect(help).not.toMatch(/-c, -c|"openai", "anthropic", "openai"|"template", "tool"/);
    }
    // diff and approve refuse tools' list options (below), so their help does not offer them.
    for (const sub of ['diff', 'approve']) {
      const help = helps.get(sub)!;
      expect(help, sub).toMatch(/--db/);
      expect(help, sub).not.toMatch(/--format|--group|--url|--local|--json/);
    }
    // tools' own options reach diff and approve, which read the ledger file: refused, not ignored.
    for (const args of refused) {
      const r = runs.shift()!;
      expect([r.code, r.stderr], args.join(' ')).toEqual([2, expect.stringMatching(new RegExp(`^switchyard tools ${args[0]}: --(format|group|url): not for diff or approve`))]);
    }
    // The README's `start --no-watch` is in start's own help too (it showed only --watch, default true).
    expect(runs.shift()!.stdout).toMatch(/--watch +Reload the config when the file changes \(--no-watch:/);
    for (const args of unknown) {
      const r = runs.shift()!;
      // As the command's whose option it is not (`--bogus servers`: the CLI's, before any command).
      const who = ['switchyard', ...args.filter((a) => a !== '--bogus' && a !== 'servers')].join(' ');
      expect([r.code, r.stderr], args.join(' ')).toEqual([2, `${who}: unknown option --bogus (see ${who} --help)\n`]);
    }
    const emptyKey = runs.shift()!;
    expect([emptyKey.code, emptyKey.stderr]).toEqual([2, 'switchyard connect: --key is empty: give the API key, or leave the option out to send SWITCHYARD_API_KEY (an unset variable in a script?)\n']);
    const noValue = runs.shift()!;
    expect([noValue.code, noValue.stderr]).toEqual([2, 'switchyard ledger query: --since needs a value after it (see switchyard ledger query --help)\n']);
    const noSub = runs.shift()!;
    expect([noSub.code, noSub.stdout, noSub.stderr]).toEqual([2, '', expect.stringMatching(/^switchyard ledger\n[\s\S]*Commands:[\s\S]*switchyard ledger query [\s\S]*\n\nGive a ledger subcommand; see --help\.\n$/)]);
    // A file that cannot be written (its folder is a file): said once, what the errno means with it.
    const d = mkdtempSync(join(tmpdir(), 'switchyard-cli-errors-'));
    writeFileSync(join(d, 'plain-file'), '');
    const r = await runCli(['init', '-c', join(d, 'plain-file', 'hub.config.json')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`switchyard init: ${join(d, 'plain-file', 'hub.config.json')}: cannot write it (ENOTDIR: a part of the path is a file, not a folder): give --config a path in a folder this user can write\n`);
    expect(r.stdout).toBe('');
    // A folder the file system refuses with ENOENT however often it is asked (/proc): Node's
    // recursive mkdir asked for ever, and init hung at full CPU.
    const proc = await runCli(['init', '-c', '/proc/switchyard-none/hub.config.json']);
    expect([proc.code, proc.stdout, proc.stderr]).toEqual([
      1,
      '',
      'switchyard init: /proc/switchyard-none/hub.config.json: cannot create the folder /proc/switchyard-none (ENOENT): give --config a path in a folder this user can write\n',
    ]);
  });
});

describe.concurrent('a CLI run in a folder removed meanwhile', () => {
  it('says so in one line, exit 1, with no stack (yargs reads the folder first)', async () => {
    const d = tmp('cwd-gone');
    // The shell's folder removed under it, as after `rm -rf` of a build folder or a worktree.
    const r = await runCli(['config', 'validate'], { cwd: d, wrap: ['sh', '-c', 'mkdir gone && cd gone && rmdir ../gone && exec "$0" "$@"'] });
    expect([r.code, r.stdout, r.stderr]).toEqual([1, '', 'switchyard: the current folder no longer exists (it was removed or moved): cd to one that does, and give paths from there\n']);
  });
});

describe.concurrent('tools without a daemon or a config', () => {
  it('offers --local for --format only, and takes a missing --config of diff and approve as a usage error', async () => {
    const bare = tmp('bare');
    const port = await freePortInRange(); // nothing listens there
    const [help, exportHelp, noConfig, diff, doctor] = await runCliBatch([
      { args: ['tools', '--help'] },
      { args: ['tools', 'export', '--help'] },
      { args: ['tools', 'diff', 'x', '-c', join(tmpdir(), 'switchyard-no-such-dir', 'hub.config.json')] },
      { args: ['tools', 'diff', 'x'], cwd: bare },
      { args: ['doctor', '--url', `http://127.0.0.1:${port}`], cwd: bare },
    ]);
    // The listing itself asks the daemon only: its help offers --local for --format, as it takes it.
    expect(help!.stdout).toMatch(/--local +With --format: connect to the upstreams directly/);
    // The export is JSON of tools: the listing's --json and --kind are not offered there; --url is said as every daemon command says it.
    expect(exportHelp!.stdout).toMatch(/--format .*\[required\]/s);
    expect(exportHelp!.stdout).not.toMatch(/--json|--kind/);
    for (const h of [help!, exportHelp!]) expect(h.stdout).toMatch(/--url +The daemon address, e\.g\. http:\/\/127\.0\.0\.1:7410, or unix:PATH/);
    // An empty name (a script's unset variable) is a usage error, as an empty --server is.
    const empties = await runCliBatch([{ args: ['tools', 'diff', ''], cwd: bare }, { args: ['tools', 'approve', '', '--server', 's'], cwd: bare }]);
    for (const [r, sub] of [[empties[0]!, 'diff'], [empties[1]!, 'approve']] as const)
      expect([r.code, r.stdout, r.stderr]).toEqual([2, '', `switchyard tools ${sub}: the name is empty: give a hub name, server/name, upstream name or uriTemplate (an unset variable in a script?)\n`]);
    // A --config that is not there is a usage error for diff and approve too, as for `ledger`.
    expect([noConfig!.code, noConfig!.stderr]).toEqual([2, `switchyard tools diff: ${join(tmpdir(), 'switchyard-no-such-dir', 'hub.config.json')}: no such config file: give the config whose ledger.path names the ledger, or the ledger itself with --db\n`]);
    // With none given and none in the folder, the ledger is ./data/ledger.db, as for `ledger`.
    expect([diff!.code, diff!.stderr]).toEqual([1, `switchyard tools diff: no ledger database at ${join(bare, 'data', 'ledger.db')}: the hub has not pinned any tool yet\n`]);
    // doctor with no config has no upstreams to check: it does not say it checks them.
    expect(doctor!.stdout).toMatch(/switchyard init/);
    expect(doctor!.stdout).toContain(`no daemon at http://127.0.0.1:${port}\n`);
  });
});

describe.concurrent('switchyard init', () => {
  it('writes a starter config with $schema that validates, and will not overwrite it without --force', async () => {
    const d = tmp('init');
    // One process for the three (runCliBatch, in this order); the real one for the last init.
    const [r, validated, again] = (await runCliBatch([{ args: ['init'], cwd: d }, { args: ['config', 'validate'], cwd: d }, { args: ['init'], cwd: d }])) as [CliRun, CliRun, CliRun];
    expect(r.code).toBe(0);
    const cfg = JSON.parse(readFileSync(join(d, 'hub.config.json'), 'utf8'));
    expect(cfg.servers).toEqual({});
    expect(cfg.$schema).toMatch(/src\/config\/hub\.config\.schema\.json$/);
    // The $schema resolves from the config, as an editor resolves it (a URL relative to the file's).
    expect(statSync(fileURLToPath(new URL(cfg.$schema, pathToFileURL(join(d, 'hub.config.json'))))).isFile()).toBe(true);
    expect(statSync(join(d, 'hub.config.json')).mode & 0o077).toBe(0);
    expect(validated.stdout).toBe('ok: 0 servers\n');
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^switchyard init: \S+ already exists; pass --force/);
    // Overwriting a file someone made readable keeps what is written private all the same.
    chmodSync(join(d, 'hub.config.json'), 0o644);
    expect((await run(['init', '--force'], { cwd: d })).code).toBe(0);
    expect(statSync(join(d, 'hub.config.json')).mode & 0o077).toBe(0);
  });

  it('refuses a folder for --config, pastes the next-step line into a shell as it is, and the first run keeps data/ out of git', async () => {
    const d = tmp('init-first-run');
    // A folder for --config is refused as such (not "already exists; pass --force", then EISDIR).
    const [folder, spaced] = (await runCliBatch([
      { args: ['init', '-c', '.', '--force'], cwd: d },
      { args: ['init', '-c', "Dev's hub.json"], cwd: d },
    ])) as [CliRun, CliRun];
    expect([folder.code, folder.stderr]).toEqual([2, 'switchyard init: . is a folder: give the file to write, such as hub.config.json\n']);
    expect(spaced.stdout).toContain(`next: switchyard config validate --config 'Dev'\\''s hub.json' && switchyard start --config 'Dev'\\''s hub.json'\n`);
    // The first run makes data/ (state key, ledger) where the config is, often a project's
    // repository: the folder keeps itself out of git.
    expect((await run(['stdio', '-c', "Dev's hub.json"], { cwd: d })).code).toBe(0);
    expect(readFileSync(join(d, 'data', '.gitignore'), 'utf8')).toMatch(/^\*$/m);
  });

  it('imports the servers of a Claude Desktop config', async () => {
    const d = tmp('init-claude');
    const src = join(d, 'claude_desktop_config.json');
    writeFileSync(
      src,
      JSON.stringify({
        globalShortcut: 'Ctrl+Space',
        mcpServers: {
          notes: { command: process.execPath, args: [join(ROOT, SDK1)], env: { SERVER_NAME: 'notes', API_TOKEN: 'abc' } },
          'my_files.v2': { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/tmp', '--api-key', 'sk-proj-abcdefghijklmnopqrstuvwx'] },
          switchyard: { command: 'npx', args: ['switchyard', 'connect'] },
        },
      }),
    );
    const [r, validated] = (await runCliBatch([
      { args: ['init', '--from', src, '--config', join(d, 'hub.config.json')], cwd: d },
      { args: ['config', 'validate', '--config', join(d, 'hub.config.json')] },
    ])) as [CliRun, CliRun];
    expect(r.code).toBe(0);
    // stdout: what was written and the next step; the notes beside them on stderr, as the command's.
    expect(r.stdout).toMatch(/^wrote \S+: 2 servers imported from .* \(Claude Desktop\): notes, my-files-v2\nnext: switchyard config validate [^\n]*\n$/);
    const notes = r.stderr.trim().split('\n');
    expect(notes).toEqual(notes.map(() => expect.stringMatching(/^switchyard init: (note|warning): /)));
    expect(r.stderr).toMatch(/^switchyard init: note: server "my_files.v2" is "my-files-v2"/m);
    expect(r.stderr).toMatch(/^switchyard init: note: server "switchyard" looks like Switchyard itself/m);
    expect(r.stderr).toMatch(/^switchyard init: warning: .*secret-looking values in env \(API_TOKEN\), written to the config in clear/m);
    expect(r.stderr).toMatch(/^switchyard init: warning: server "my_files.v2" has secret-looking values in args \(args\[4\]\), written to the config in clear/m);
    expect(r.stderr).not.toContain('sk-proj-');
    const cfg = JSON.parse(readFileSync(join(d, 'hub.config.json'), 'utf8'));
    expect(cfg.servers).toEqual({
      notes: { command: process.execPath, args: [join(ROOT, SDK1)], env: { SERVER_NAME: 'notes', API_TOKEN: 'abc' } },
      'my-files-v2': { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/tmp', '--api-key', 'sk-proj-abcdefghijklmnopqrstuvwx'] },
    });
    expect(validated.stdout).toBe('ok: 2 servers\n');
  });

  it('imports a VS Code .vscode/mcp.json with comments, types, inputs and ${workspaceFolder}', async () => {
    const d = tmp('init-vscode');
    mkdirSync(join(d, '.vscode'));
    writeFileSync(
      join(d, '.vscode', 'mcp.json'),
      `{
  // Servers for this workspace
  "inputs": [
    { "type": "promptString", "id": "gh-token", "description": "GitHub token", "password": true },
  ],
  "servers": {
    "local": { "type": "stdio", "command": "node", "args": ["\${workspaceFolder}/server.mjs"], "env": { "MODE": "dev" } },
    "github": {
      "type": "http",
      "url": "https://api.githubcopilot.com/mcp/",
      "headers": { "Authorization": "Bearer \${input:gh-token}" }, /* remote */
    },
    "old": { "type": "sse", "url": "http://127.0.0.1:9/sse" },
  },
}`,
    );
    const [r, ok] = (await runCliBatch([
      { args: ['init', '--from', '.vscode/mcp.json'], cwd: d },
      { args: ['config', 'validate'], cwd: d, env: { SWITCHYARD_INPUT_GH_TOKEN: 't' } },
    ])) as [CliRun, CliRun];
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^wrote hub\.config\.json: 3 servers imported from \.vscode\/mcp\.json \(VS Code\): local, github, old\nnext: /);
    expect(r.stderr).toMatch(/^switchyard init: note: .*set the environment variable SWITCHYARD_INPUT_GH_TOKEN/m);
    expect(r.stderr).toMatch(/^switchyard init: warning: hub\.config\.json does not validate yet: .*SWITCHYARD_INPUT_GH_TOKEN is not set/m);
    const cfg = JSON.parse(readFileSync(join(d, 'hub.config.json'), 'utf8'));
    expect(cfg.servers).toEqual({
      local: { command: 'node', args: [`${d}/server.mjs`], env: { MODE: 'dev' } },
      github: { url: 'https://api.githubcopilot.com/mcp/', headers: { Authorization: 'Bearer ${env:SWITCHYARD_INPUT_GH_TOKEN}' } },
      old: { url: 'http://127.0.0.1:9/sse' },
    });
    expect(ok.stdout).toBe('ok: 3 servers\n');
  });

  it('imports a Cursor mcp.json and refuses a file that is not a client config', async () => {
    const d = tmp('init-cursor');
    mkdirSync(join(d, '.cursor'));
    writeFileSync(join(d, '.cursor', 'mcp.json'), JSON.stringify({ mcpServers: { remote: { url: 'http://127.0.0.1:9/mcp', headers: { 'X-Key': '${env:KEY}' } } } }));
    writeFileSync(join(d, 'other.json'), '{"editor.fontSize": 12}');
    const [r, bad, missing, missingKept] = (await runCliBatch([
      { args: ['init', '--from', join(d, '.cursor', 'mcp.json')], cwd: d },
      { args: ['init', '--from', 'other.json', '--force'], cwd: d },
      { args: ['init', '--from', 'nope.json', '--force'], cwd: d },
      { args: ['init', '--from', 'nope.json'], cwd: d },
    ])) as [CliRun, CliRun, CliRun, CliRun];
    expect(r.stdout).toMatch(/\(Cursor\): remote/);
    // The refused imports below wrote nothing over it.
    expect(JSON.parse(readFileSync(join(d, 'hub.config.json'), 'utf8')).servers.remote).toEqual({ url: 'http://127.0.0.1:9/mcp', headers: { 'X-Key': '${env:KEY}' } });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/no "mcpServers" or "servers"/);
    // A --from that names nothing: a usage error in one line, said before "already exists; pass --force" (which led to it).
    for (const m of [missing, missingKept]) expect([m.code, m.stderr]).toEqual([2, 'switchyard init: nope.json: no such file: give --from the client config to import\n']);
  });

  it('warns, without quoting it, of a password or token in an imported url, and says a --from URL is no client config without echoing it', async () => {
    const d = tmp('init-url-secret');
    writeFileSync(join(d, 'claude_desktop_config.json'), JSON.stringify({ mcpServers: { remote: { url: 'https://bob:hunter2-pw@127.0.0.1:9/mcp?api_key=sk-live-999' } } }));
    const url = 'https://bob:hunter2-pw@127.0.0.1:9/mcp';
    const [r, fromUrl] = (await runCliBatch([
      { args: ['init', '--from', 'claude_desktop_config.json'], cwd: d },
      { args: ['init', '--from', url, '-c', 'other.json'], cwd: d },
    ])) as [CliRun, CliRun];
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(
      /^switchyard init: warning: server "remote" has a password \(its user info\) and a secret-looking query parameter \(api_key\) in its url, written to the config in clear: put each in an environment variable and write "\$\{env:NAME\}" in its place in the url/m,
    );
    for (const out of [r.stdout, r.stderr, fromUrl.stdout, fromUrl.stderr]) for (const secret of ['hunter2-pw', 'sk-live-999']) expect(out).not.toContain(secret);
    expect([fromUrl.code, fromUrl.stdout]).toEqual([2, '']);
    expect(fromUrl.stderr).toMatch(/^switchyard init: --from takes a client's config file \(.*\), not a URL: add an HTTP server to the written config under "servers"/);
    expect(existsSync(join(d, 'other.json'))).toBe(false);
  });

  it("refuses to write the hub's config over the client config it imports from, --force or not", async () => {
    const d = tmp('init-same');
    mkdirSync(join(d, '.cursor'));
    mkdirSync(join(d, 'link'));
    const client = JSON.stringify({ mcpServers: { remote: { url: 'http://127.0.0.1:9/mcp' } } });
    writeFileSync(join(d, '.cursor', 'mcp.json'), client);
    symlinkSync(join(d, '.cursor', 'mcp.json'), join(d, 'link', 'hub.config.json'));
    // The same file by another spelling, and through a symlink: --force replaced the client's
    // own config (its other settings, its servers as the client had them) with the hub's.
    const runs = await runCliBatch([
      { args: ['init', '--from', '.cursor/mcp.json', '--config', join(d, '.cursor', '..', '.cursor', 'mcp.json'), '--force'], cwd: d },
      { args: ['init', '--from', '.cursor/mcp.json', '--config', 'link/hub.config.json', '--force'], cwd: d },
      { args: ['init', '--from', '.cursor/mcp.json', '--config', '.cursor/mcp.json'], cwd: d },
    ]);
    for (const r of runs)
      expect([r.code, r.stdout, r.stderr]).toEqual([2, '', expect.stringMatching(/^switchyard init: \S+: --from and --config name the same file: the import would replace the client's config; give --config another file, such as hub\.config\.json\n$/)]);
    expect(readFileSync(join(d, '.cursor', 'mcp.json'), 'utf8')).toBe(client);
  });
});

describe('servers, doctor and tools without a daemon', () => {
  let d: string;
  let blocker: Server;
  let port: number;
  beforeAll(async () => {
    d = tmp('nodaemon');
    // Something else holds the configured port.
    blocker = createServer((s) => s.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi'));
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    port = (blocker.address() as { port: number }).port;
    writeFileSync(
      join(d, 'hub.config.json'),
      JSON.stringify({
        listen: { port },
        ledger: { path: './ledger.db' },
        // autoApprove on an untrusted server: ignored, which doctor says (not a config error).
        servers: { legacy: nodeServer(SDK1), modern: { ...nodeServer(SDK2), autoApprove: true }, broken: { command: process.execPath, args: ['-e', 'process.exit(3)'] } },
      }),
    );
  });
  afterAll(() => blocker?.close());

  it('servers says clearly that no daemon runs', async () => {
    const free = tmp('free');
    // A port that was free a moment ago: nothing listens there.
    const unused = await freePortInRange();
    writeFileSync(join(free, 'hub.config.json'), JSON.stringify({ listen: { port: unused }, servers: {} }));
    const r = await run(['servers'], { cwd: free });
    expect(r.code).toBe(3);
    // As the command's, as a refusal or no answer is.
    const none = `no switchyard daemon is running at http://127.0.0.1:${unused} (start one with \`switchyard start\`)\n`;
    expect(r.stderr).toBe(`switchyard servers: ${none}`);
    const exports = [['tools', '--format', 'openai'], ['tools', 'export', '--format', 'anthropic']];
    const typos = [['servers'], ['tools'], ['reload']];
    // An empty --server or --group (a script's unset variable) listed every server's tools.
    const empties: [string[], string][] = [
      [['tools', '--server', ''], 'server id'],
      [['tools', '--format', 'openai', '--group', ''], 'tool group'],
      [['tools', 'export', '--format', 'anthropic', '--server', ''], 'server id'],
      [['tools', 'approve', '--server', ''], 'server id'],
    ];
    const [t, fallback, ...runs] = await runCliBatch([
      { args: ['tools'], cwd: free },
      { args: ['tools', 'export', '--format', 'openai'], cwd: free },
      ...exports.map((args) => ({ args: [...args, '--url', `http://127.0.0.1:${unused}`], cwd: free })),
      ...typos.map((cmd) => ({ args: [...cmd, '-c', 'hub.config.jsn'], cwd: free })),
      ...empties.map(([args]) => ({ args, cwd: free })),
    ]);
    // `tools` says it the same way, with the same exit code.
    expect(t!.code).toBe(3);
    expect(t!.stderr).toBe(`switchyard tools: ${none}`);
    // An export with no daemon at the config's address looks at the upstreams itself, saying so as the command's note.
    expect([fallback!.code, fallback!.stderr]).toEqual([0, `switchyard tools export: note: ${none.trimEnd()}; connecting to the upstreams of hub.config.json directly\n`]);
    // And the export, asked of that address (it was exit 1, as a daemon's error).
    for (const args of exports) {
      const e = runs.shift()!;
      expect([e.code, e.stdout, e.stderr], args.join(' ')).toEqual([3, '', `switchyard ${args[1] === 'export' ? 'tools export' : 'tools'}: ${none}`]);
    }
    // A config named on purpose that is not there is a typo, not "no daemon" (nor the default address).
    for (const cmd of typos) {
      const typo = runs.shift()!;
      expect(typo.code, cmd[0]).toBe(2);
      expect(typo.stderr).toBe(`switchyard ${cmd[0]}: hub.config.jsn: no such config file: give the config the daemon runs with, or its address with --url\n`);
    }
    for (const [args, what] of empties) {
      const empty = runs.shift()!;
      const option = args.includes('--group') ? '--group' : '--server';
      // As the command's own, and as every empty option is said (`ledger query --server ''` too).
      const who = ['export', 'approve'].includes(args[1]!) ? `tools ${args[1]}` : 'tools';
      expect([empty.code, empty.stdout, empty.stderr], args.join(' ')).toEqual([2, '', `switchyard ${who}: ${option} is empty: give a ${what}, or leave the option out (an unset variable in a script?)\n`]);
    }
  });

  it('a --port that is no port, or a SWITCHYARD_LOG_LEVEL that is no level, is a usage error in one line (exit 2)', async () => {
    // The real process for the first; the others in one (runCliBatch).
    const first = await run(['start', '--port', 'abc'], { cwd: d });
    const ports = ['99999', '--port=-1'];
    const cmds = [['stdio'], ['servers']];
    const runs = [
      first,
      ...(await runCliBatch([
        ...ports.map((port) => ({ args: port.startsWith('--') ? ['start', port] : ['start', '--port', port], cwd: d })),
        ...cmds.map((cmd) => ({ args: cmd, cwd: d, env: { SWITCHYARD_LOG_LEVEL: 'verbose' } })),
      ])),
    ];
    for (const port of ['abc', ...ports]) {
      const r = runs.shift()!;
      expect(r.code, port).toBe(2);
      expect(r.stderr).toBe(`switchyard start: --port must be a whole number from 0 to 65535, got ${JSON.stringify(port.replace('--port=', ''))}\n`);
    }
    for (const cmd of cmds) {
      const r = runs.shift()!;
      expect(r.code, cmd[0]).toBe(2);
      expect(r.stderr).toBe('switchyard: SWITCHYARD_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; it is "verbose"\n');
    }
  });

  it('SWITCHYARD_LOG_LEVEL set but empty (`SWITCHYARD_LOG_LEVEL= switchyard …`) is the default level, not a usage error', async () => {
    const r = await runCli(['config', 'validate', '--config', join(ROOT, 'hub.config.json')], { env: { SWITCHYARD_LOG_LEVEL: '' } });
    expect(r.stderr).not.toContain('SWITCHYARD_LOG_LEVEL');
    expect(r.code).toBe(0);
  });

  it('an option given twice is a usage error in one line (exit 2), whatever the command; a repeatable one is not', async () => {
    // -c twice reached Node as an array ("paths[0] argument must be of type string", exit 1);
    // --port twice was refused as a value no one typed.
    // The real process for the first; the others in one (runCliBatch), each its own exit code.
    const configs = [['ledger', 'query'], ['servers'], ['start'], ['doctor'], ['tools', '--format', 'openai'], ['keys', 'list']];
    const ports = [['start', '--port', '7983', '--port', '7984'], ['start', '-p', '7983', '--port', '7984']];
    const keys = tmp('twice-keys');
    writeFileSync(join(keys, 'hub.config.json'), '{}');
    const twice = (args: string[]) => [...args, '-c', 'hub.config.json', '--config', 'other.json'];
    const runs = [
      await run(twice(configs[0]!), { cwd: d }),
      ...(await runCliBatch([
        ...configs.slice(1).map((args) => ({ args: twice(args), cwd: d })),
        ...ports.map((args) => ({ args, cwd: d })),
        { args: ['servers', 'restart', 'x', '--timeout', '5', '--timeout', '6'], cwd: d },
        { args: ['keys', 'add', 'bob', '--scope', 'a', '--scope', 'b'], cwd: keys },
      ])),
    ];
    for (const args of configs) {
      const r = runs.shift()!;
      // As the command's own (`tools --format openai`: the command is `tools`).
      const who = args.filter((a) => !a.startsWith('-') && a !== 'openai').join(' ');
      expect([r.code, r.stdout, r.stderr], args.join(' ')).toEqual([2, '', `switchyard ${who}: --config is given twice: give it once\n`]);
    }
    for (const args of ports) {
      const r = runs.shift()!;
      expect([r.code, r.stdout, r.stderr], args.join(' ')).toEqual([2, '', 'switchyard start: --port is given twice: give it once\n']);
    }
    const timeout = runs.shift()!;
    expect([timeout.code, timeout.stderr]).toEqual([2, 'switchyard servers restart: --timeout is given twice: give it once\n']);
    // --scope is declared repeatable: a key with two scopes.
    const add = runs.shift()!;
    expect([add.code, add.stderr]).toEqual([0, expect.stringMatching(/shown only this once/)]);
    expect(JSON.parse(readFileSync(join(keys, 'hub.config.json'), 'utf8')).auth.apiKeys[0].scopes).toEqual(['a', 'b']);
  }, 60_000);

  // An unset variable in a script (`--db "$COPY"`): read as not given, `ledger verify --db ''`
  // verified the config's own ledger, and `servers -c ''` asked the default address.
  it('an empty --config or --db is a usage error in one line (exit 2), whatever the command', async () => {
    const empty = [['ledger', 'verify', '--db', ''], ['ledger', 'query', '-c', ''], ['servers', '-c', ''], ['doctor', '--config', ''], ['config', 'validate', '-c', ''], ['start', '-c', ''], ['init', '-c', '']];
    const runs = await runCliBatch(empty.map((args) => ({ args, cwd: d })));
    for (const args of empty) {
      const r = runs.shift()!;
      const option = args.includes('--db') ? '--db' : '--config';
      const who = args.filter((a) => !a.startsWith('-') && a !== '').join(' ');
      expect([r.code, r.stdout, r.stderr], args.join(' ')).toEqual([2, '', `switchyard ${who}: ${option} is empty: give the file's path (an unset variable in a script?)\n`]);
    }
    // `init --from ''` wrote a starter config with no servers; `start --host ''` is no address.
    const own = tmp('empty-from');
    const [from, host, opener] = await runCliBatch([
      { args: ['init', '--from', '', '-c', 'new.json'], cwd: own },
      { args: ['start', '--host', '', '-c', 'none.json'], cwd: own },
      // An empty shell command opened no browser, without a word, and the login waited until --timeout.
      { args: ['login', 'u', '-c', 'none.json', '--opener'], cwd: own },
    ]);
    expect([from!.code, from!.stderr]).toEqual([2, "switchyard init: --from is empty: give the client config's path (an unset variable in a script?)\n"]);
    expect(existsSync(join(own, 'new.json'))).toBe(false);
    expect([host!.code, host!.stderr]).toEqual([2, 'switchyard start: --host is empty: give an address such as 127.0.0.1, or leave the option out (an unset variable in a script?)\n']);
    expect([opener!.code, opener!.stderr]).toEqual([2, "switchyard login: --opener is empty: give a command that opens $SWITCHYARD_LOGIN_URL, or --open for the platform's browser (an unset variable in a script?)\n"]);
  });

  // yargs reads an empty number as 0: `start --port "$PORT"` with PORT unset listened on a random
  // free port, `stdio --ledger-wait-ms ''` waited for no one, `ledger tail -n ''` showed no rows.
  it('an empty number option, or an option given no value after it, is a usage error in one line (exit 2), whatever the command', async () => {
    // A config that is not there: without the check each would fail on it (or run), not on the option.
    const empty: [string[], string][] = [
      [['start', '--port', '', '-c', 'none.json'], '--port'],
      [['start', '-p', '', '-c', 'none.json'], '--port'],
      [['start', '--port=', '-c', 'none.json'], '--port'],
      [['stdio', '--ledger-wait-ms', '', '-c', 'none.json'], '--ledger-wait-ms'],
      [['ledger', 'tail', '-n', '', '--db', 'none.db'], '-n'],
      [['ledger', 'query', '--limit', '', '--db', 'none.db'], '--limit'],
      [['servers', 'restart', 'x', '--timeout', '', '--url', 'http://127.0.0.1:9'], '--timeout'],
    ];
    // Left out altogether (the last word, or another option next), yargs read it as not given: the default.
    const missing: [string[], string][] = [
      [['start', '-c', 'none.json', '--port'], '--port'],
      [['ledger', 'query', '--limit', '--json', '--db', 'none.db'], '--limit'],
      [['ledger', 'tail', '--db', 'none.db', '-n'], '-n'],
    ];
    // A text option with a default, left out so, took the default without a word: `keys list -c`
    // listed the keys of ./hub.config.json, `servers -c --json` asked its daemon. (-c - is a value.)
    const text: [string[], string][] = [
      [['keys', 'list', '-c'], '--config'],
      [['servers', '-c', '--json'], '--config'],
      [['tools', 'export', '--format', 'openai', '--config', '--'], '--config'],
      [['connect', '--url'], '--url'],
    ];
    const runs = await runCliBatch([...empty, ...missing, ...text].map(([args]) => ({ args, cwd: d })));
    // As the command's own: its words up to the first option (`servers restart x`: the id is no command).
    const who = (args: string[]) => ['switchyard', ...args.slice(0, args.findIndex((a) => a.startsWith('-')))].filter((w) => w !== 'x').join(' ');
    for (const [args, option] of empty) {
      const r = runs.shift()!;
      expect([r.code, r.stdout, r.stderr], args.join(' ')).toEqual([2, '', `${who(args)}: ${option} is empty: give a number, or leave the option out (an unset variable in a script?)\n`]);
    }
    for (const [args, option] of missing) {
      const r = runs.shift()!;
      expect([r.code, r.stdout, r.stderr], args.join(' ')).toEqual([2, '', `${who(args)}: ${option} needs a number after it: give one, or leave the option out\n`]);
    }
    for (const [args, option] of text) {
      const r = runs.shift()!;
      const fallback = option === '--url' ? 'http://127.0.0.1:7410/mcp' : 'hub.config.json';
      expect([r.code, r.stdout, r.stderr], args.join(' ')).toEqual([2, '', `${who(args)}: ${option} needs a value after it: give one, or leave the option out for the default, ${fallback}\n`]);
    }
  });

  it('start on a port in use says so in one line and exits 1', async () => {
    // Its own folder: a start opens the ledger before it listens, and the doctor test wants none.
    const own = tmp('busyport');
    // An upstream that leaves a mark when it is spawned: a hub that cannot listen starts none.
    const marker = join(own, 'spawned');
    const marks = { command: process.execPath, args: ['-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'x'); setTimeout(() => {}, 60000)`] };
    writeFileSync(join(own, 'hub.config.json'), JSON.stringify({ listen: { port }, ledger: { path: './ledger.db' }, servers: { legacy: nodeServer(SDK1), marks } }));
    const r = await run(['start'], { cwd: own });
    expect(r.code).toBe(1);
    expect(existsSync(marker)).toBe(false);
    expect(r.stderr).not.toContain('upstream'); // no interrupted start logged as an upstream's failure
    expect(r.stderr).toContain(`switchyard start: cannot listen on 127.0.0.1:${port}: the address is in use (another hub, or another program)\n`);
    expect(r.stderr).not.toMatch(/\n\s+at |Options:/); // no stack, no usage text
    // --port naming the admin listener's port: the config's own check (they must differ) cannot
    // see it, and the start failed on the port as if another program held it.
    writeFileSync(join(own, 'hub.config.json'), JSON.stringify({ listen: { admin: { port } }, ledger: { path: './ledger.db' }, servers: { marks } }));
    const same = await run(['start', '--port', String(port)], { cwd: own });
    expect([same.code, same.stderr]).toEqual([2, `switchyard start: --port ${port} is the port of listen.admin in hub.config.json: the admin listener is a listener of its own; give another port\n`]);
    expect(existsSync(marker)).toBe(false);
  });

  it('start with an unreadable OAuth jwksFile names the config and exits 2, with or without auth.oauth.audience', async () => {
    for (const audience of [{ audience: 'https://hub.example/mcp' }, {}]) {
      const own = tmp('jwks');
      const oauth = { issuer: 'https://issuer.example', jwksFile: 'missing-jwks.json', ...audience };
      writeFileSync(join(own, 'hub.config.json'), JSON.stringify({ listen: { port: 0 }, ledger: { enabled: false }, auth: { oauth }, servers: {} }));
      const r = await run(['start'], { cwd: own });
      expect([r.code, r.stdout], JSON.stringify(audience)).toEqual([2, '']);
      expect(r.stderr).toContain(`switchyard start: hub.config.json: auth.oauth.jwksFile: cannot read a JSON Web Key Set from ${join(own, 'missing-jwks.json')} (ENOENT)\n`);
      expect(r.stderr).not.toMatch(/cannot listen|\n\s+at /);
    }
  });

  it('doctor finds the port in use and the broken upstream, and checks the rest directly', async () => {
    const r = await run(['doctor', '--json'], { cwd: d });
    expect(r.stdout, r.stderr).not.toBe('');
    expect(r.code).toBe(1);
    const f = JSON.parse(r.stdout) as Json[];
    const by = (check: string) => f.filter((x) => x.check === check);
    expect(by('config')).toEqual([
      { level: 'ok', check: 'config', message: 'hub.config.json: 3 servers' },
      { level: 'warn', check: 'config', message: expect.stringMatching(/^servers\.modern\.autoApprove is ignored: it applies only to a server with "trust": "trusted"/) },
    ]);
    // Something answers on the port, but it is not a switchyard daemon.
    expect(by('daemon')[0].level).toBe('fail');
    expect(by('upstreams').map((x) => [x.level, x.message.split(' ')[0]])).toEqual([
      ['ok', 'legacy'],
      ['ok', 'modern'],
      ['fail', 'broken'],
    ]);
    expect(by('tool caps')[0]).toMatchObject({ level: 'ok', message: expect.stringMatching(/exposes 10 tools/) });
    expect(by('ledger')[0]).toMatchObject({ level: 'ok', message: expect.stringMatching(/does not exist yet/) });
  });

  it('doctor reports config problems', async () => {
    const bad = tmp('badcfg');
    writeFileSync(join(bad, 'hub.config.json'), JSON.stringify({ listen: { port: 'x' }, servers: { 'bad id!': { command: 'x' } } }));
    const r = await run(['doctor'], { cwd: bad });
    expect(r.code).toBe(1);
    // Named as the file's, as the config's other findings are (and start's lines).
    expect(r.stdout).toMatch(/^fail\s+config\s+hub\.config\.json: listen\.port/m);
    expect(r.stdout).toMatch(/\n2 problems, \d+ warnings?\n$/); // counted in words, not "problem(s)"
    // A config start refuses beyond the schema (an unreadable jwksFile): failed, not "ok".
    writeFileSync(join(bad, 'hub.config.json'), JSON.stringify({ listen: { port: 0 }, ledger: { enabled: false }, auth: { oauth: { issuer: 'https://issuer.test', jwksFile: 'gone.json' } }, servers: {} }));
    const oauth = await run(['doctor', '--json'], { cwd: bad });
    expect([oauth.code, (JSON.parse(oauth.stdout) as Json[]).filter((f) => f.check === 'config')]).toEqual([
      1,
      [{ level: 'fail', check: 'config', message: `hub.config.json: auth.oauth.jwksFile: cannot read a JSON Web Key Set from ${join(bad, 'gone.json')} (ENOENT)` }],
    ]);
  });

  it('tools --format openai --local exports straight from the upstreams', async () => {
    const r = await run(['tools', '--format', 'openai', '--local'], { cwd: d });
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc.format).toBe('openai');
    expect(doc.tools.map((t: Json) => t.function.name).sort()).toEqual(['add', 'counter_bump', 'echo', 'fail', 'slow'].flatMap((n) => [`legacy__${n}`, `modern__${n}`]).sort());
    expect(doc.tools.every((t: Json) => t.type === 'function' && t.function.strict === true && t.function.parameters.additionalProperties === false)).toBe(true);
  });
});

describe('servers, doctor and tools against a running daemon', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ groups: { mod: { servers: ['modern'] } }, servers: { legacy: nodeServer(SDK1), modern: { ...nodeServer(SDK2), prefix: 'legacy' } } });
    const end = Date.now() + 20_000;
    while (Date.now() < end) {
      const h = (await (await fetch(new URL('/healthz', hub.url))).json()) as { servers: { state: string }[] };
      if (h.servers.every((s) => s.state === 'ready')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
  });

  it('servers prints state, era, version, tools and restarts', async () => {
    const r = await run(['servers', '--url', hub.url]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ID\s+STATE\s+ERA\s+SERVER\s+TOOLS\s+IN FLIGHT\s+RESTARTS\s+SINCE\s+LAST ERROR$/);
    expect(lines[1]).toMatch(/^legacy\s+ready\s+2025-11-25\s+sdk1-legacy 1\.0\.0\s+5\s+0\s+0\s+/);
    expect(lines[2]).toMatch(/^modern\s+ready\s+2026-07-28\s+sdk2-modern 1\.0\.0\s+5\s+0\s+0\s+/);
    const json = JSON.parse((await run(['servers', '--json', '--url', hub.url])).stdout);
    expect(json.map((s: Json) => s.id)).toEqual(['legacy', 'modern']);
    expect(json[0]).toMatchObject({ inFlight: 0, queued: 0, failMode: expect.any(String) });
  });

  it('doctor asks the daemon and warns about renamed tools', async () => {
    const r = await run(['doctor', '--config', hub.configFile, '--url', hub.url, '--json']);
    const f = JSON.parse(r.stdout) as Json[];
    expect(f.find((x) => x.check === 'daemon')).toMatchObject({ level: 'ok', message: expect.stringMatching(/running at/) });
    const renamed = f.filter((x) => x.check === 'tool names' && x.level === 'warn');
    expect(renamed).toHaveLength(5);
    expect(renamed[0].message).toMatch(/^modern\/\w+ is "legacy__\w+_[0-9a-z]+" for clients \(renamed:collision\)$/);
    expect(f.find((x) => x.check === 'ledger')).toMatchObject({ level: 'ok', message: expect.stringMatching(/hash chain verified/) });
    // The daemon's own config: no word of another one.
    expect(f.filter((x) => x.check === 'daemon' && x.level !== 'ok')).toEqual([]);
    expect(r.code).toBe(0);
  });

  // doctor checked the config it was given and the upstreams of whatever daemon answered: one of
  // another config on that port had them pass, all good, as that config's.
  it('doctor warns when the daemon runs servers other than the config names', async () => {
    const other = join(tmp('other-config'), 'hub.config.json');
    writeFileSync(other, JSON.stringify({ ledger: { enabled: false }, servers: { legacy: nodeServer(SDK1), notes: { command: 'node' } } }));
    const r = await run(['doctor', '--config', other, '--url', hub.url, '--json']);
    const f = JSON.parse(r.stdout) as Json[];
    expect(f.filter((x) => x.check === 'daemon' && x.level === 'warn')).toEqual([
      {
        level: 'warn',
        check: 'daemon',
        message: `the daemon at ${new URL(hub.url).origin} runs modern, which ${other} does not name, and has none of ${other}'s notes: it serves another config file, or has not loaded an edit of this one (\`switchyard reload\`); the upstreams below are the daemon's`,
      },
    ]);
    expect(r.code).toBe(0);
  });

  it('refuses a second hub on the same ledger file, naming the one that writes it', async () => {
    const r = await run(['start', '--config', hub.configFile, '--port', '0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`ledger .*ledger\\.db is in use by another switchyard process \\(pid ${hub.proc.pid}, switchyard start\\)`));
    expect(r.stderr).toMatch(/switchyard connect/);
  });

  it('tools --format anthropic and tools export --format openai use the names clients see', async () => {
    const a = JSON.parse((await run(['tools', '--format', 'anthropic', '--url', hub.url])).stdout);
    expect(a.tools).toHaveLength(10);
    expect(a.tools[0]).toEqual({ name: 'legacy__echo', description: 'Echo the text back', input_schema: expect.objectContaining({ type: 'object' }) });
    const o = JSON.parse((await run(['tools', 'export', '--format', 'openai', '--url', hub.url, '--server', 'modern'])).stdout);
    expect(o.tools).toHaveLength(5);
    expect(o.tools.every((t: Json) => /^legacy__\w+_[0-9a-z]+$/.test(t.function.name))).toBe(true);
  });

  it('a --server the hub has not: exit 1 naming the servers it has, listing or exporting, from the daemon or locally', async () => {
    const asked = [
      ['tools', '--url', hub.url],
      ['tools', '--format', 'openai', '--url', hub.url],
      ['tools', '--format', 'openai', '--local', '-c', hub.configFile],
      ['tools', 'export', '--format', 'openai', '--local', '-c', hub.configFile],
    ];
    // The real process for the first; the others in one (runCliBatch).
    const runs = [
      await run([...asked[0]!, '--server', 'nope']),
      ...(await runCliBatch([
        ...asked.slice(1).map((args) => ({ args: [...args, '--server', 'nope'] })),
        { args: ['tools', '--format', 'openai', '--local', '-c', hub.configFile, '--server', 'toString'] },
      ])),
    ];
    const origin = new URL(hub.url).origin;
    for (const args of asked) {
      const r = runs.shift()!;
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(/no server named "nope".*\(servers: legacy, modern/);
      expect(r.stdout).toBe('');
      // The daemon's words first, as the command's; its status and address last (it led with its route and status).
      if (!args.includes('--local')) expect(r.stderr, args.join(' ')).toMatch(new RegExp(`^switchyard tools: no server named "nope" \\(servers: .*\\) \\[HTTP 404 from ${origin.replace(/\./g, '\\.')}\\]\n$`));
      // Locally, the same: as the command's, one line, naming the config.
      else expect(r.stderr, args.join(' ')).toBe(`switchyard tools${args[1] === 'export' ? ' export' : ''}: no server named "nope" in ${hub.configFile} (servers: legacy, modern)\n`);
    }
    // A name every object has is no server either (config.servers['toString'] was Object's function).
    const odd = runs.shift()!;
    expect([odd.code, odd.stdout]).toEqual([1, '']);
    expect(odd.stderr).toMatch(/no server named "toString".*\(servers: legacy, modern/);
  });

  it("the export of a tool group holds only that group's tools; it cannot widen to the upstreams", async () => {
    const forms = [['tools', '--format', 'openai'], ['tools', 'export', '--format', 'anthropic']];
    // The real process for the first; the others in one (runCliBatch).
    const runs = [
      await run([...forms[0]!, '--url', hub.url, '--group', 'mod']),
      ...(await runCliBatch([
        { args: [...forms[1]!, '--url', hub.url, '--group', 'mod'] },
        { args: ['tools', '--format', 'openai', '--local', '--group', 'mod'] },
        ...forms.map((args) => ({ args: [...args, '--local', '--url', hub.url] })),
      ])),
    ];
    for (const _ of forms) {
      const doc = JSON.parse(runs.shift()!.stdout) as { tools: Json[] };
      expect(doc.tools).toHaveLength(5);
    }
    // --local asks no daemon, and only the daemon applies groups: a usage error (exit 2), not a failure.
    const local = runs.shift()!;
    expect([local.code, local.stdout, local.stderr]).toEqual([2, '', 'switchyard tools: --group needs the running daemon (it applies the groups); drop --local\n']);
    // --url too: it was ignored, and the config's upstreams exported instead of that daemon's catalog.
    for (const args of forms) {
      const r = runs.shift()!;
      // As the command's own, as its other errors are.
      expect([r.code, r.stdout, r.stderr]).toEqual([2, '', `switchyard ${args[1] === 'export' ? 'tools export' : 'tools'}: --url names a daemon to ask, and --local asks none; drop one of them\n`]);
    }
  });

  it('a listen.port fetch refuses to connect to (a "bad port", 6667): config validate and doctor warn of it, and servers and doctor say why they cannot ask there', async () => {
    const d = tmp('bad-port');
    const file = join(d, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ listen: { port: 6667 }, ledger: { path: join(d, 'ledger.db') }, servers: {} }));
    const [validate, servers, doctor] = await runCliBatch([{ args: ['config', 'validate', '-c', file] }, { args: ['servers', '-c', file] }, { args: ['doctor', '--json', '-c', file] }]);
    const why = 'fetch refuses to connect to it (a "bad port" of the Fetch standard), so switchyard\'s CLI, browsers and MCP clients built on fetch cannot reach a hub there';
    expect([validate!.code, validate!.stdout, validate!.stderr]).toEqual([0, 'ok: 0 servers\n', `switchyard config validate: warning: listen.port 6667: ${why}; choose another port\n`]);
    // It said "the request failed: bad port", and doctor took it for a busy daemon or another program.
    expect([servers!.code, servers!.stderr]).toEqual([1, `switchyard servers: http://127.0.0.1:6667: port 6667: ${why}; give the hub's listen.port (or listen.admin.port) another one\n`]);
    const findings = JSON.parse(doctor!.stdout) as Json[];
    expect(findings.filter((f) => f.check === 'config' || f.check === 'daemon')).toEqual([
      { level: 'ok', check: 'config', message: `${file}: 0 servers` },
      { level: 'warn', check: 'config', message: `listen.port 6667: ${why}; choose another port` },
      { level: 'fail', check: 'daemon', message: `http://127.0.0.1:6667: port 6667: ${why}; give the hub's listen.port (or listen.admin.port) another one` },
    ]);
  });

  it('a --url that is no http(s) URL is one line and exit 2, for every command that takes it', async () => {
    const cmds = ['servers', 'doctor', 'tools'];
    // The real process for the first; the others in one (runCliBatch).
    const runs = [await run([cmds[0]!, '--url', 'notaurl']), ...(await runCliBatch(cmds.slice(1).map((cmd) => ({ args: [cmd, '--url', 'notaurl'] }))))];
    for (const cmd of cmds) {
      const r = runs.shift()!;
      expect(r.code, cmd).toBe(2);
      expect(r.stderr.trim()).toBe(`switchyard ${cmd}: --url must be an http(s) URL such as http://127.0.0.1:7410 (or unix: and the admin socket's path), got "notaurl"`);
      expect(r.stdout).toBe('');
    }
  });

  // It said `--url must be an http(s) URL …, got ""` of a value no one typed.
  it('a --url with no value after it (or an empty one) is a usage error saying it needs one, for every command that takes it', async () => {
    const args = [
      ['servers', '--url'],
      ['servers', '--url', '--json'],
      ['tools', '--url='],
      ['reload', '--url', ''],
      ['doctor', '--url'],
      ['servers', 'restart', 'x', '--url'],
    ];
    const runs = [await run(args[0]!), ...(await runCliBatch(args.slice(1).map((a) => ({ args: a }))))];
    for (const a of args) {
      const r = runs.shift()!;
      const cmd = a.slice(0, a[0] === 'servers' && a[1] === 'restart' ? 2 : 1).join(' ');
      expect(r.code, a.join(' ')).toBe(2);
      expect(r.stderr.trim(), a.join(' ')).toBe(
        `switchyard ${cmd}: --url needs a value: the daemon's address, such as http://127.0.0.1:7410 (or unix: and the admin socket's path); leave the option out to read it from the config`,
      );
      expect(r.stdout).toBe('');
    }
  });
});

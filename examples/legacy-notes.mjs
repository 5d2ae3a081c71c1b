#!/usr/bin/env node
// Example upstream in the legacy era (2025-11-25), built on SDK v1: an in-memory notes store.
//   stdio (default):   node examples/legacy-notes.mjs
//   HTTP (sessionful): node examples/legacy-notes.mjs --http 3101   -> http://127.0.0.1:3101/mcp
// stdout carries only protocol traffic in stdio mode; logs go to stderr.
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';
import { httpPortFromArgv } from './lib/http-bridge.mjs';
import { serveLegacySessions } from './lib/legacy-http.mjs';

const log = (msg) => process.stderr.write(`[legacy-notes] ${msg}\n`);

// Shared by every session of this process, so HTTP clients see each other's notes.
const notes = new Map();
let nextId = 1;

const SUMMARY_STYLES = ['brief', 'detailed', 'bullet'];

function noteText(note) {
  return `#${note.id} ${note.title}\n${note.body}`;
}

function createServer() {
  const server = new McpServer(
    { name: 'legacy-notes', version: '1.0.0' },
    { instructions: 'A scratch pad: add notes, list them, search them.' },
  );

  server.registerTool(
    'add_note',
    {
      title: 'Add note',
      description: 'Store a note and return its id',
      inputSchema: { title: z.string().min(1).max(200), body: z.string().max(10_000) },
      outputSchema: { id: z.number().int(), title: z.string() },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async ({ title, body }) => {
      const note = { id: nextId++, title, body, createdAt: new Date().toISOString() };
      notes.set(note.id, note);
      return {
        content: [{ type: 'text', text: `Saved note #${note.id}: ${title}` }],
        structuredContent: { id: note.id, title },
      };
    },
  );

  server.registerTool(
    'list_notes',
    { title: 'List notes', description: 'List every stored note', annotations: { readOnlyHint: true, openWorldHint: false } },
    async () => {
      const all = [...notes.values()];
      const text = all.length === 0 ? 'No notes yet.' : all.map((n) => `#${n.id} ${n.title}`).join('\n');
      return { content: [{ type: 'text', text }] };
    },
  );

  server.registerTool(
    'search_notes',
    {
      title: 'Search notes',
      description: 'Case-insensitive search in note titles and bodies',
      inputSchema: { query: z.string().min(1) },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ query }) => {
      const q = query.toLowerCase();
      const hits = [...notes.values()].filter((n) => n.title.toLowerCase().includes(q) || n.body.toLowerCase().includes(q));
      const text = hits.length === 0 ? `No notes match "${query}".` : hits.map(noteText).join('\n\n');
      return { content: [{ type: 'text', text }] };
    },
  );

  server.registerPrompt(
    'summarize_notes',
    {
      title: 'Summarize notes',
      description: 'Ask the model to summarize every stored note',
      argsSchema: {
        style: completable(z.string(), (value) => SUMMARY_STYLES.filter((s) => s.startsWith(String(value ?? '')))),
      },
    },
    ({ style }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'text',
            text: `Summarize these notes in a ${style} style:\n\n${[...notes.values()].map(noteText).join('\n\n') || '(no notes)'}`,
          },
        },
      ],
    }),
  );

  server.registerResource(
    'notes-index',
    'notes://index',
    { title: 'Notes index', description: 'One line per note', mimeType: 'text/plain' },
    async (uri) => ({
      contents: [{ uri: uri.href, mimeType: 'text/plain', text: [...notes.values()].map((n) => `#${n.id} ${n.title}`).join('\n') }],
    }),
  );

  server.registerResource(
    'note',
    new ResourceTemplate('notes://note/{id}', {
      list: async () => ({
        resources: [...notes.values()].map((n) => ({ uri: `notes://note/${n.id}`, name: n.title, mimeType: 'text/plain' })),
      }),
      complete: { id: (value) => [...notes.keys()].map(String).filter((id) => id.startsWith(String(value ?? ''))) },
    }),
    { title: 'Note', description: 'A single note by id', mimeType: 'text/plain' },
    async (uri, { id }) => {
      const note = notes.get(Number(id));
      // -32002 is the 2025-era resource-not-found code.
      if (!note) throw new McpError(-32002, `Note ${id} not found`, { uri: uri.href });
      return { contents: [{ uri: uri.href, mimeType: 'text/plain', text: noteText(note) }] };
    },
  );

  return server;
}

const port = httpPortFromArgv();
if (port === undefined) {
  await createServer().connect(new StdioServerTransport());
  log('serving on stdio');
} else {
  const { port: bound } = await serveLegacySessions(createServer, { port, log });
  process.stdout.write(`LISTENING ${bound}\n`);
  log(`serving on http://127.0.0.1:${bound}/mcp`);
}

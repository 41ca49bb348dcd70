// The MCP clients the conformance suite drives, each behind one small adapter: connect to a gateway
// (a stdio command or a Streamable HTTP URL), list tool names, call a tool and report what the
// client's own API handed back (isError, the text a model would read, the structured envelope).
// No model is involved: each framework's tool is invoked directly.
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as StdioV1 } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport as HttpV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as HttpV2,
} from '@modelcontextprotocol/client';
import { StdioClientTransport as StdioV2 } from '@modelcontextprotocol/client/stdio';
import { createMCPClient } from '@ai-sdk/mcp';
import { Experimental_StdioMCPTransport as AiSdkStdio } from '@ai-sdk/mcp/mcp-stdio';
import { MultiServerMCPClient } from '@langchain/mcp-adapters';
import { ToolMessage } from '@langchain/core/messages';
import { ToolInputParsingException } from '@langchain/core/tools';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { ensureNode22 } from './node22.js';

export type Target =
  | { kind: 'stdio'; command: string; args: string[]; env: Record<string, string>; cwd: string }
  | { kind: 'http'; url: string };

export interface CallOutcome {
  isError: boolean;
  /** The text content a model would read (all text parts joined). */
  text: string;
  structured: Record<string, unknown> | null;
  /**
   * Set when the framework refused the call itself, before anything reached the gateway (it checks
   * arguments against the tool's inputSchema): the framework's own message.
   */
  refusedByClient?: string;
}

export interface Connection {
  /** The protocol revision the connection landed on. */
  readonly version: string | null;
  list(): Promise<string[]>;
  call(name: string, args: Record<string, unknown>, timeoutMs?: number): Promise<CallOutcome>;
  close(): Promise<void>;
}

export interface ClientKind {
  /** Stable id used in results and the README table. */
  id: string;
  label: string;
  /** The framework validates arguments against inputSchema before calling the tool. */
  validatesArguments?: boolean;
  /** Runs under Node 22 (node22.ts); skipped with the reason when that cannot be provisioned. */
  needsNode22?: boolean;
  connect(target: Target): Promise<Connection>;
}

interface SdkLikeResult {
  isError?: boolean;
  content?: unknown;
  structuredContent?: unknown;
}

function outcomeOf(r: SdkLikeResult): CallOutcome {
  const parts = Array.isArray(r.content)
    ? (r.content as Array<{ type: string; text?: string }>)
    : [];
  return {
    isError: r.isError === true,
    text: parts
      .filter((p) => p.type === 'text')
      .map((p) => p.text ?? '')
      .join('\n'),
    structured: (r.structuredContent as Record<string, unknown> | undefined) ?? null,
  };
}

const info = (name: string) => ({ name, version: '1.0.0' });

const sdkV1: ClientKind = {
  id: 'sdk-v1',
  label: 'MCP SDK v1 client (1.32)',
  async connect(target) {
    let version: string | null = null;
    const transport =
      target.kind === 'stdio'
        ? new StdioV1({
            command: target.command,
            args: target.args,
            env: target.env,
            cwd: target.cwd,
            stderr: 'ignore',
          })
        : new HttpV1(new URL(target.url));
    // The v1 client tells its transport the negotiated revision after initialize.
    const t = transport as { setProtocolVersion?: (v: string) => void };
    const original = t.setProtocolVersion?.bind(transport);
    t.setProtocolVersion = (v: string) => {
      version = v;
      original?.(v);
    };
    const client = new ClientV1(info('conformance-v1'), {
      capabilities: {},
    });
    await client.connect(transport);
    return {
      get version() {
        return version;
      },
      list: async () => (await client.listTools()).tools.map((t) => t.name),
      call: async (name, args, timeoutMs) =>
        outcomeOf(
          (await client.callTool(
            { name, arguments: args },
            undefined,
            timeoutMs ? { timeout: timeoutMs } : {},
          )) as SdkLikeResult,
        ),
      close: () => client.close(),
    };
  },
};

type V2Mode = 'legacy' | 'auto' | { pin: '2026-07-28' };

function sdkV2(mode: V2Mode, id: string, label: string): ClientKind {
  return {
    id,
    label,
    async connect(target) {
      const transport =
        target.kind === 'stdio'
          ? new StdioV2({
              command: target.command,
              args: target.args,
              env: target.env,
              cwd: target.cwd,
              stderr: 'ignore',
            })
          : new HttpV2(new URL(target.url));
      const client = new ClientV2(info(`conformance-${id}`), {
        versionNegotiation: { mode },
      });
      await client.connect(transport);
      return {
        get version() {
          return client.getNegotiatedProtocolVersion() ?? null;
        },
        list: async () => (await client.listTools()).tools.map((t) => t.name),
        call: async (name, args, timeoutMs) =>
          outcomeOf(
            (await client.callTool(
              { name, arguments: args },
              timeoutMs ? { timeout: timeoutMs } : {},
            )) as SdkLikeResult,
          ),
        close: () => client.close(),
      };
    },
  };
}

/** Vercel AI SDK: `createMCPClient`, then each tool's `execute` as a model's tool call would run it. */
const aiSdk: ClientKind = {
  id: 'ai-sdk-mcp',
  label: 'AI SDK @ai-sdk/mcp 1.0 (createMCPClient)',
  async connect(target) {
    const client = await createMCPClient({
      transport:
        target.kind === 'stdio'
          ? new AiSdkStdio({
              command: target.command,
              args: target.args,
              env: target.env,
              cwd: target.cwd,
            })
          : { type: 'http', url: target.url },
    });
    const tools = await client.tools();
    let n = 0;
    return {
      version: null,
      list: () => Promise.resolve(Object.keys(tools)),
      call: async (name, args) => {
        const tool = tools[name];
        if (!tool?.execute) throw new Error(`no tool ${name}`);
        n += 1;
        const out = (await tool.execute(args, {
          toolCallId: `call_${n}`,
          messages: [],
        })) as SdkLikeResult;
        return outcomeOf(out);
      },
      close: () => client.close(),
    };
  },
};

/**
 * The envelope a model reads from the text mirror: everything after the first line. For frameworks
 * that hand the model text only (LangChain turns an `isError` result into a thrown ToolException).
 */
export function envelopeFromText(text: string): Record<string, unknown> | null {
  const rest = text.slice(text.indexOf('\n') + 1);
  try {
    return JSON.parse(rest) as Record<string, unknown>;
  } catch {
    return null;
  }
}

function unwrapBlock(content: string): { type: string; text: string } {
  try {
    const block = JSON.parse(content) as { type?: unknown; text?: unknown };
    if (block.type === 'text' && typeof block.text === 'string')
      return { type: 'text', text: block.text };
  } catch {
    // plain text
  }
  return { type: 'text', text: content };
}

/**
 * LangChain `@langchain/mcp-adapters`: `MultiServerMCPClient.getTools()`, then each tool's `invoke`
 * with a tool call, as an agent's ToolNode runs it. An `isError` result is thrown as a
 * ToolException whose message is "MCP tool 'T' on server 'S' returned an error: " + the result's
 * text; that message is what LangGraph shows the model, so the outcome's text is the message with
 * exactly that prefix removed (any other shape fails the check).
 */
const langchain: ClientKind = {
  id: 'langchain',
  label: 'LangChain @langchain/mcp-adapters 1.1 (MultiServerMCPClient)',
  validatesArguments: true,
  async connect(target) {
    const client = new MultiServerMCPClient({
      mcpServers: {
        candor:
          target.kind === 'stdio'
            ? {
                transport: 'stdio',
                command: target.command,
                args: target.args,
                env: target.env,
                cwd: target.cwd,
                stderr: 'ignore',
              }
            : { transport: 'http', url: target.url, automaticSSEFallback: false },
      },
      throwOnLoadError: true,
      useStandardContentBlocks: false,
    });
    const tools = await client.getTools();
    let n = 0;
    return {
      version: null,
      list: () => Promise.resolve(tools.map((t) => t.name)),
      call: async (name, args, timeoutMs) => {
        const tool = tools.find((t) => t.name === name);
        if (!tool) throw new Error(`no tool ${name}`);
        n += 1;
        const prefix = `MCP tool '${name}' on server 'candor' returned an error: `;
        let message: unknown;
        try {
          message = await tool.invoke(
            { name, args, id: `call_${n}`, type: 'tool_call' },
            timeoutMs ? { timeout: timeoutMs } : {},
          );
        } catch (error) {
          if (error instanceof ToolInputParsingException)
            return { isError: true, text: '', structured: null, refusedByClient: error.message };
          const text = error instanceof Error ? error.message : String(error);
          if (
            !(error instanceof Error) ||
            error.name !== 'ToolException' ||
            !text.startsWith(prefix)
          )
            throw error;
          const body = text.slice(prefix.length);
          return { isError: true, text: body, structured: envelopeFromText(body) };
        }
        if (!ToolMessage.isInstance(message))
          throw new Error('invoke did not return a ToolMessage');
        // A result with structuredContent comes back as one text block carrying it, which LangChain
        // core hands the model as that block's JSON (`{"type":"text","text":"DONE — …`): the
        // model reads the mirror inside it. Exactly that shape is unwrapped here.
        const blocks =
          typeof message.content === 'string' ? [unwrapBlock(message.content)] : message.content;
        const text = (blocks as Array<{ type: string; text?: string }>)
          .filter((b) => b.type === 'text')
          .map((b) => b.text ?? '')
          .join('\n');
        const artifact = (message.artifact ?? []) as Array<{ type: string; data?: unknown }>;
        const structured = artifact.find((a) => a.type === 'mcp_structured_content')?.data;
        return {
          isError: message.status === 'error',
          text,
          structured: (structured as Record<string, unknown> | undefined) ?? null,
        };
      },
      close: () => client.close(),
    };
  },
};

/**
 * OpenAI Agents SDK (`@openai/agents` 0.20, which needs Node 22): MCPServerStdio or
 * MCPServerStreamableHttp in a Node 22 child (test/fixtures/node22/agents-driver.mjs), each call
 * through the FunctionTool an agent run would invoke. `text` is that tool's output.
 */
const openaiAgents: ClientKind = {
  id: 'openai-agents',
  label: 'OpenAI Agents SDK 0.20 (MCPServerStdio / MCPServerStreamableHttp)',
  needsNode22: true,
  async connect(target) {
    const n22 = ensureNode22();
    const child = spawn(n22.node, [n22.agentsDriver, JSON.stringify(target)], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { PATH: process.env['PATH'] ?? '', ...n22.env },
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    const pending = new Map<
      number,
      { resolve: (v: unknown) => void; reject: (e: Error) => void }
    >();
    const exited = new Promise<void>((resolve) =>
      child.once('exit', (code) => {
        for (const p of pending.values())
          p.reject(new Error(`agents driver exited (${code}): ${stderr.slice(-2000)}`));
        pending.clear();
        resolve();
      }),
    );
    createInterface({ input: child.stdout }).on('line', (line) => {
      const msg = JSON.parse(line) as { id: number; ok: boolean; value?: unknown; error?: string };
      const p = pending.get(msg.id);
      if (!p) return;
      pending.delete(msg.id);
      if (msg.ok) p.resolve(msg.value);
      else p.reject(new Error(msg.error ?? 'agents driver failed'));
    });
    let next = 0;
    const ask = (msg: Record<string, unknown>): Promise<unknown> => {
      const id = msg['id'] === 0 ? 0 : ++next;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        if (id !== 0) child.stdin.write(`${JSON.stringify({ ...msg, id })}\n`);
      });
    };
    await ask({ id: 0 }); // the driver's "ready" (connected, tools listed)
    return {
      version: null,
      list: async () => (await ask({ op: 'list' })) as string[],
      call: async (name, args, timeoutMs) => {
        const v = (await ask({ op: 'call', name, args, ...(timeoutMs ? { timeoutMs } : {}) })) as {
          isError: boolean;
          text: string;
          structured: Record<string, unknown> | null;
        };
        return { isError: v.isError, text: v.text, structured: v.structured };
      },
      close: async () => {
        await ask({ op: 'close' }).catch(() => undefined);
        await exited;
      },
    };
  },
};

export const CLIENTS: readonly ClientKind[] = [
  sdkV1,
  sdkV2('legacy', 'sdk-v2-legacy', 'MCP SDK v2 client (2.4), legacy mode'),
  sdkV2('auto', 'sdk-v2-auto', 'MCP SDK v2 client (2.4), auto mode'),
  sdkV2({ pin: '2026-07-28' }, 'sdk-v2-pin', 'MCP SDK v2 client (2.4), pinned 2026-07-28'),
  aiSdk,
  langchain,
  openaiAgents,
];

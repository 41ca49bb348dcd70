// `auth: oauth` in candor.yaml: mistakes are named at their place (FILE:LINE:COL).
import { describe, expect, it } from 'vitest';
import { formatIssue } from './locate.js';
import { parseConfig } from './load.js';

const base = (upstream: string) => `ledger: 'memory:'
upstreams:
  tracker:
${upstream}`;

function problems(text: string): string[] {
  const r = parseConfig(text, 'candor.yaml');
  expect(r.ok).toBe(false);
  return r.failure!.issues.map(formatIssue);
}

describe('upstreams.NAME.auth: oauth', () => {
  it('accepts a complete OAuth upstream', () => {
    const r = parseConfig(
      base(`    url: https://mcp.tracker.example/mcp
    auth: oauth
    oauth:
      scopes: [issues:read, issues:write]
      client_metadata_url: https://candor.example/oauth/client.json
`),
      'candor.yaml',
    );
    expect(r.ok, JSON.stringify(r.failure)).toBe(true);
    expect(r.value!.config.upstreams!['tracker']).toMatchObject({
      auth: 'oauth',
      oauth: { scopes: ['issues:read', 'issues:write'] },
    });
  });

  it('names each mistake with FILE:LINE:COL', () => {
    expect(
      problems(
        base(`    command: node
    auth: oauth
`),
      ),
    ).toEqual([expect.stringMatching(/^candor\.yaml:5:\d+: .*auth: oauth.*Streamable HTTP/)]);
    expect(
      problems(
        base(`    url: https://mcp.tracker.example/mcp
    auth: oauth
    credential: vault:tracker
`),
      ),
    ).toEqual([expect.stringMatching(/^candor\.yaml:6:\d+: .*candor upstream login/)]);
    expect(
      problems(
        base(`    url: https://mcp.tracker.example/mcp
    auth: basic
`),
      ),
    ).toEqual([expect.stringMatching(/^candor\.yaml:5:\d+: /)]);
    expect(
      problems(
        base(`    url: https://mcp.tracker.example/mcp
    oauth: { scopes: [a] }
`),
      ),
    ).toEqual([expect.stringMatching(/^candor\.yaml:5:\d+: .*need `auth: oauth`/)]);
    expect(
      problems(
        base(`    url: https://mcp.tracker.example/mcp
    auth: oauth
    oauth:
      client_metadata_url: http://candor.example/client.json
      scopes: ['two words']
`),
      ),
    ).toEqual([
      expect.stringMatching(/^candor\.yaml:7:\d+: .*https with a path/),
      expect.stringMatching(/^candor\.yaml:8:\d+: .*one token/),
    ]);
    expect(
      problems(
        base(`    url: https://mcp.tracker.example/mcp
    auth: oauth
    oauth:
      client_id: abc
      client_credential: vault:tracker-client
`),
      ),
    ).toEqual([expect.stringMatching(/^candor\.yaml:8:\d+: .*either `client_id`/)]);
  });
});

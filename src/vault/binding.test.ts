import { describe, expect, it } from 'vitest';
import { bindingAdmits, formatBinding, parseBinding } from './binding.js';

describe('bindings', () => {
  it('normalises origins and keeps the path prefix', () => {
    expect(parseBinding('HTTPS://API.Example.test:443/v1').value).toEqual({
      kind: 'http',
      origin: 'https://api.example.test',
      path_prefix: '/v1',
    });
    expect(parseBinding('http://[::1]:8080').value).toEqual({
      kind: 'http',
      origin: 'http://[::1]:8080',
      path_prefix: '/',
    });
    expect(parseBinding('ssh:web-1.prod').value).toEqual({ kind: 'ssh', host_ref: 'web-1.prod' });
    expect(formatBinding(parseBinding('https://a.test').value!)).toBe('https://a.test');
    expect(formatBinding(parseBinding('https://a.test/v1/').value!)).toBe('https://a.test/v1/');
  });

  it.each([
    ['ftp://a.test', 'expected http(s)://host[/path] or ssh:HOST'],
    ['https://u:p@a.test', 'user info is not allowed'],
    ['https://a.test/v1?x=1', 'query and fragment are not allowed'],
    ['https://a.test/v1%2Fadmin', 'encoded slash or backslash'],
    ['ssh:', 'bad SSH host reference'],
    ['https://', 'not a valid URL'],
  ])('refuses %s', (spec, why) => {
    const parsed = parseBinding(spec);
    expect(parsed.failure?.code).toBe('invalid_binding');
    expect(parsed.failure?.message).toContain(why);
  });

  it('matches path prefixes on whole segments', () => {
    const v1 = [parseBinding('https://a.test/v1').value!];
    const slash = [parseBinding('https://a.test/v1/').value!];
    const at = (url: string, b = v1) => bindingAdmits(b, { kind: 'http', url });
    expect(at('https://a.test/v1')).toBe(true);
    expect(at('https://a.test/v1/x?q=1')).toBe(true);
    expect(at('https://a.test/v10')).toBe(false);
    expect(at('https://a.test/v1/../admin')).toBe(false);
    expect(at('https://a.test/v1/%2e%2e/admin')).toBe(false);
    expect(at('https://a.test/v1', slash)).toBe(false);
    expect(at('https://a.test/v1/x', slash)).toBe(true);
    expect(bindingAdmits(v1, { kind: 'ssh', host_ref: 'a.test' })).toBe(false);
  });
});

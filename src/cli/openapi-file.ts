// A first look at a file given as `--openapi SPEC`, before the OpenAPI parser sees it: a file that
// is not an OpenAPI document at all (a README, a JSON Schema, a config file) is named as such,
// instead of surfacing a parser message about JSON Schemas that says nothing about the mistake.
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';

/** One line saying why `file` is not an OpenAPI document, or null when it may be one. */
export async function notOpenApiDocument(file: string): Promise<string | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return null; // unreadable: the loader reports it with its code (exit 3)
  }
  let doc: unknown;
  try {
    // YAML 1.2 reads JSON too.
    doc = parse(text, { maxAliasCount: 1000 });
  } catch {
    // A document that says it is OpenAPI but does not parse: the loader names the place.
    if (/^\s*["']?(openapi|swagger)["']?\s*:/m.test(text)) return null;
    return `${file} is not an OpenAPI document: it is neither JSON nor YAML (give an OpenAPI 3.0 or 3.1 document)`;
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    return `${file} is not an OpenAPI document: it is not a JSON or YAML mapping (give an OpenAPI 3.0 or 3.1 document)`;
  if (!('openapi' in doc) && !('swagger' in doc))
    return `${file} is not an OpenAPI document: it has no top-level "openapi" field (give an OpenAPI 3.0 or 3.1 document)`;
  return null;
}

// A one-file gzipped tar, as POST /v1/agents takes an agent bundle: how a YAML spec is uploaded
// without a YAML parser in the browser (the server parses it, with its bundle checks).

const BLOCK = 512;

function writeString(header: Uint8Array, offset: number, length: number, value: string): void {
  const bytes = new TextEncoder().encode(value);
  header.set(bytes.subarray(0, length), offset);
}

function octal(value: number, length: number): string {
  return value.toString(8).padStart(length - 1, "0") + "\0";
}

/** A ustar archive holding `name` with `data`. */
export function tarFile(name: string, data: Uint8Array, mtime = 0): Uint8Array {
  const header = new Uint8Array(BLOCK);
  writeString(header, 0, 100, name);
  writeString(header, 100, 8, "0000644\0");
  writeString(header, 108, 8, octal(0, 8));
  writeString(header, 116, 8, octal(0, 8));
  writeString(header, 124, 12, octal(data.length, 12));
  writeString(header, 136, 12, octal(mtime, 12));
  writeString(header, 148, 8, "        "); // checksum counts as spaces while it is computed
  writeString(header, 156, 1, "0");
  writeString(header, 257, 6, "ustar\0");
  writeString(header, 263, 2, "00");
  let sum = 0;
  for (const b of header) sum += b;
  writeString(header, 148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  const padded = Math.ceil(data.length / BLOCK) * BLOCK;
  const out = new Uint8Array(BLOCK + padded + 2 * BLOCK);
  out.set(header, 0);
  out.set(data, BLOCK);
  return out;
}

export async function gzip(data: Uint8Array): Promise<Blob> {
  const stream = new Blob([data as BlobPart]).stream().pipeThrough(new CompressionStream("gzip"));
  return await new Response(stream).blob();
}

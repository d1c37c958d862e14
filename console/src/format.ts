export function when(epochSeconds: number | undefined): string {
  if (!epochSeconds) return "";
  return new Date(epochSeconds * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

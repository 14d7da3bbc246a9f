/** JSON of a value, cut to `max` characters, for messages. */
export function brief(value: unknown, max = 300): string {
  let text: string;
  if (typeof value === "string") text = JSON.stringify(value);
  else {
    try {
      text = JSON.stringify(value) ?? String(value);
    } catch {
      text = String(value);
    }
  }
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

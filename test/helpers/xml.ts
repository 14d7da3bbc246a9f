// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
//
// A small, strict XML 1.0 parser for the JUnit files the conformance command writes: elements,
// attributes, text, character and the five predefined entity references, comments, one prolog. Anything
// else that is not well-formed (a stray `<` or `&`, an unknown entity, a mismatched or unclosed tag, a
// repeated attribute, a control character, content after the root) throws with its offset.

/** An element: its name, attributes (values unescaped), child elements and text (unescaped, concatenated). */
export interface XmlElement {
  name: string;
  attributes: Record<string, string>;
  children: XmlElement[];
  text: string;
}

const NAME = /[A-Za-z_:][\w.:-]*/y;
const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
// XML 1.0 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
const INVALID_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

/** Parses a whole document and returns its root element. */
export function parseXml(source: string): XmlElement {
  if (INVALID_CHAR.test(source)) throw new Error(`character not allowed in XML at ${source.search(INVALID_CHAR)}`);
  let at = 0;
  const error = (message: string): never => {
    throw new Error(`${message} at offset ${at}: ${JSON.stringify(source.slice(at, at + 40))}`);
  };
  const skipSpace = () => {
    while (at < source.length && /\s/.test(source[at]!)) at++;
  };
  const name = (): string => {
    NAME.lastIndex = at;
    const match = NAME.exec(source);
    if (!match) return error("expected a name");
    at += match[0].length;
    return match[0];
  };
  const unescape = (raw: string): string =>
    raw.replace(/&([^;]*);|&|</g, (whole, entity: string | undefined) => {
      if (whole === "<") return error("a raw < in character data");
      if (entity === undefined) return error("a bare &");
      if (entity in ENTITIES) return ENTITIES[entity]!;
      const code = /^#x([0-9a-fA-F]+)$/.exec(entity)?.[1] ?? /^#(\d+)$/.exec(entity)?.[1];
      if (code === undefined) return error(`unknown entity &${entity};`);
      const value = entity.startsWith("#x") ? Number.parseInt(code, 16) : Number(code);
      const char = String.fromCodePoint(value);
      if (INVALID_CHAR.test(char)) return error(`character reference to a character not allowed in XML (&${entity};)`);
      return char;
    });
  const skipMisc = () => {
    for (;;) {
      skipSpace();
      if (source.startsWith("<!--", at)) {
        const end = source.indexOf("-->", at + 4);
        if (end < 0) error("an unclosed comment");
        at = end + 3;
      } else return;
    }
  };

  const element = (): XmlElement => {
    if (source[at] !== "<") error("expected <");
    at++;
    const tag = name();
    const attributes: Record<string, string> = {};
    for (;;) {
      const before = at;
      skipSpace();
      if (source.startsWith("/>", at)) {
        at += 2;
        return { name: tag, attributes, children: [], text: "" };
      }
      if (source[at] === ">") {
        at++;
        break;
      }
      if (at === before) error("expected space between attributes");
      const attribute = name();
      skipSpace();
      if (source[at] !== "=") error("expected =");
      at++;
      skipSpace();
      const quote = source[at];
      if (quote !== '"' && quote !== "'") error("expected a quoted value");
      const end = source.indexOf(quote!, at + 1);
      if (end < 0) error("an unclosed attribute value");
      if (attribute in attributes) error(`attribute ${attribute} repeated`);
      attributes[attribute] = unescape(source.slice(at + 1, end));
      at = end + 1;
    }
    const children: XmlElement[] = [];
    let text = "";
    for (;;) {
      if (at >= source.length) error(`<${tag}> not closed`);
      if (source.startsWith("</", at)) {
        at += 2;
        const closing = name();
        if (closing !== tag) error(`</${closing}> closes <${tag}>`);
        skipSpace();
        if (source[at] !== ">") error("expected >");
        at++;
        return { name: tag, attributes, children, text };
      }
      if (source.startsWith("<!--", at)) {
        skipMisc();
        continue;
      }
      if (source.startsWith("<![CDATA[", at)) {
        const end = source.indexOf("]]>", at);
        if (end < 0) error("an unclosed CDATA section");
        text += source.slice(at + 9, end);
        at = end + 3;
        continue;
      }
      if (source[at] === "<") {
        children.push(element());
        continue;
      }
      const next = source.indexOf("<", at);
      const raw = source.slice(at, next < 0 ? source.length : next);
      if (raw.includes("]]>")) error("]]> in character data");
      text += unescape(raw);
      at += raw.length;
    }
  };

  if (source.startsWith("<?xml", at)) {
    const end = source.indexOf("?>", at);
    if (end < 0) error("an unclosed prolog");
    if (!/^<\?xml\s+version="1\.[0-9]"(\s+encoding="[A-Za-z][\w.-]*")?(\s+standalone="(yes|no)")?\s*$/.test(source.slice(at, end))) error("a malformed prolog");
    at = end + 2;
  }
  skipMisc();
  const root = element();
  skipMisc();
  if (at !== source.length) error("content after the root element");
  return root;
}

/** Every element named `name` below `root` (depth first, in document order). */
export function findAll(root: XmlElement, name: string): XmlElement[] {
  const found: XmlElement[] = [];
  const walk = (element: XmlElement) => {
    for (const child of element.children) {
      if (child.name === name) found.push(child);
      walk(child);
    }
  };
  walk(root);
  return found;
}

// What the report's charts share: hand-written SVG as plain strings (escaped once, in xml()), the colours, text
// that fits its room, nice axis ticks and a time axis in ms or s. No dependencies, browser-safe.

/** Escapes text and attribute values for XML. */
export function xml(s: string): string {
  return s
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&apos;");
}

const FONT = "Helvetica, Arial, sans-serif";
export const INK = "#222",
  MUTED = "#666",
  GRID = "#e3e3e3",
  AXIS = "#888";
export const DOLPHIN = "#e8590c",
  DYNAMO = "#4e79a7",
  OTHER = "#b9c3cc",
  PAPER = "#b2182b";
export const PALETTE = [
  "#59a14f",
  "#b07aa1",
  "#76b7b2",
  "#edc948",
  "#9c755f",
  "#ff9da7",
  "#e15759",
  "#17becf",
  "#7f7f7f",
  "#bcbd22",
];

export const HALO = 'stroke="#ffffff" stroke-width="3" stroke-linejoin="round" paint-order="stroke"';
export const n2 = (x: number): string => (Math.round(x * 10) / 10).toString();

export function svgOpen(width: number, height: number, title: string): string {
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n` +
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
    `font-family="${FONT}" font-size="12" role="img">\n` +
    `<title>${xml(title)}</title>\n<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>\n`
  );
}

/** A chart's opening: the SVG element, its bold title and its muted subtitle, centred, each fitted to the width. */
export function chartHead(width: number, height: number, title: string, subtitle: string): string[] {
  return [
    svgOpen(width, height, title),
    fitText(width / 2, 24, width - 20, 15, title, `text-anchor="middle" font-weight="bold" fill="${INK}"`),
    fitText(width / 2, 44, width - 20, 12, subtitle, `text-anchor="middle" fill="${MUTED}"`),
  ];
}

export function text(x: number, y: number, s: string, attrs = ""): string {
  return `<text x="${n2(x)}" y="${n2(y)}"${attrs ? " " + attrs : ""}>${xml(s)}</text>`;
}

/** Rough width of a string at `size` px in a sans-serif font (layout only; DejaVu Sans, the widest common fallback). */
export const textWidth = (s: string, size: number): number => s.length * size * 0.6;

/** Text at `size` px, shrunk (down to 9 px) to fit `maxPx`. */
export function fitText(x: number, y: number, maxPx: number, size: number, s: string, attrs: string): string {
  const fitted = Math.max(9, Math.min(size, Math.floor((maxPx / textWidth(s, 1)) * 2) / 2));
  return text(x, y, s, `font-size="${fitted}" ${attrs}`);
}

export function truncate(s: string, maxPx: number, size: number): string {
  if (textWidth(s, size) <= maxPx) return s;
  const keep = Math.max(1, Math.floor(maxPx / (size * 0.6)) - 1);
  return s.slice(0, keep) + "…";
}

/** Ticks 1, 2 or 5 × 10^k covering [lo, hi] with about `count` steps. */
export function niceTicks(lo: number, hi: number, count = 5): number[] {
  if (!(hi > lo)) hi = lo + (lo === 0 ? 1 : Math.abs(lo));
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * mag >= raw) ?? 10) * mag;
  const start = Math.floor(lo / step + 1e-9) * step,
    end = Math.ceil(hi / step - 1e-9) * step;
  const ticks: number[] = [];
  for (let v = start; v <= end + step / 2; v += step) ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

export const tickLabel = (v: number): string =>
  Math.abs(v) >= 1e4 ? `${n2(v / 1000)}k` : Number(v.toPrecision(6)).toString();

/** A time axis in ms or s, whichever reads better for values up to `maxMs`. */
export function timeUnit(maxMs: number): { unit: "ms" | "s"; div: number } {
  return maxMs >= 2000 ? { unit: "s", div: 1000 } : { unit: "ms", div: 1 };
}
export function timeValue(vMs: number, u: { unit: string; div: number }): string {
  if (!Number.isFinite(vMs)) return "n/a";
  const v = vMs / u.div;
  return `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)} ${u.unit}`;
}

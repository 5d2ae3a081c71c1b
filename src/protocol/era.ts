/** The two protocol eras the hub speaks. Only the edges look at these. */
export const LEGACY = '2025-11-25' as const;
export const MODERN = '2026-07-28' as const;
export type Era = typeof LEGACY | typeof MODERN;

/** Legacy versions we accept in `initialize` (newest first); we answer with LEGACY for anything else. */
export const LEGACY_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'] as const;
/** Modern versions the hub serves and speaks. */
export const MODERN_VERSIONS = [MODERN] as const;

export function isEra(v: unknown): v is Era {
  return v === LEGACY || v === MODERN;
}

import type { PartRecord } from './part.js';

/**
 * Why a tool or prompt a client names is held back for a pending pin change, in the words of its
 * refusal: the client listed it before the change and is told what happened to it, and who can
 * let it back (an operator, with `switchyard tools diff/approve`), not only that it is unknown.
 */
export function heldReason(noun: 'tool' | 'prompt', r: PartRecord): string {
  const what = r.pin?.state === 'renamed' ? `the approved ${noun} "${r.pin.renamedFrom}" under a new name` : `its definition changed since it was approved`;
  return `held back: ${what}; an operator must review it (switchyard tools diff, approve)`;
}

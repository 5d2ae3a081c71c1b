/**
 * A count and the noun it counts, the noun singular for one: "1 row", "0 rows", "3 servers".
 * Lines built as `${n} rows` said "1 rows" (doctor, ledger verify, config validate, …).
 */
export function counted(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

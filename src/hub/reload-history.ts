/**
 * What a reload's report says beyond what this reload applied: the plugins the hub runs without,
 * and, when it changed nothing, the last reload that did (the file watch may have applied the
 * file before `switchyard reload` asked).
 */
import type { HubConfig } from '../config/types.js';
import { restartOnlyValues } from '../config/reload.js';
import { changedAnything, type ReloadReport } from './reload.js';

export class ReloadHistory {
  /** The last reload that changed anything, and when: a reload that finds nothing new says it. */
  private lastChange: { at: string; report: ReloadReport } | undefined;
  /** What the file held for the sections the last reload left for a restart (restartOnlyValues). */
  private restartPending = restartOnlyValues({} as HubConfig, []);

  /** `report`, this reload's of `next`, completed: `pluginsNotLoaded`, and `earlier` when it changed nothing. */
  complete(report: ReloadReport, next: HubConfig, pluginsNotLoaded: readonly string[]): ReloadReport {
    const kept = { at: new Date().toISOString(), report: { ...report } };
    report.pluginsNotLoaded = [...pluginsNotLoaded];
    // A reload that found a new restart-only change changed something too: an earlier reload's
    // report, shown as "nothing new since", would pass for this one's (the CLI prints it so).
    const pending = restartOnlyValues(next, report.restartOnly);
    const fresh = pending !== this.restartPending;
    this.restartPending = pending;
    if (changedAnything(report) || fresh) this.lastChange = kept;
    else if (this.lastChange) report.earlier = this.lastChange;
    return report;
  }
}

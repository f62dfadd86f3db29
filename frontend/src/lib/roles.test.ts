import { describe, expect, it } from 'vitest';
import { ROLE_TEMPLATES, deleteRole, roleNameProblem, splitCapabilities, updateRole } from './roles';
import { MESSAGES } from './messages';

describe('creating a role', () => {
  it('refuses what the gateway refuses, before asking it', () => {
    expect(roleNameProblem('writer')).toBeNull();
    expect(roleNameProblem('数据分析师')).toBeNull();
    expect(roleNameProblem('Admin')).not.toBeNull();
    expect(roleNameProblem('a/b')).not.toBeNull();
    expect(roleNameProblem('two words')).not.toBeNull();
    expect(roleNameProblem('.hidden')).not.toBeNull();
    expect(roleNameProblem('$session_owner')).not.toBeNull();
  });

  it('splits capabilities on English and Chinese commas', () => {
    expect(splitCapabilities('code, debug，调试、code ,')).toEqual(['code', 'debug', '调试']);
  });

  it('labels every template in both languages', () => {
    for (const tp of ROLE_TEMPLATES) expect(MESSAGES[tp.label]).toHaveLength(2);
    for (const tp of ROLE_TEMPLATES.slice(1)) expect(tp.personaZh).not.toBe('');
  });
});

function fakeGw(answer: (method: string, params: any) => any) {
  const calls: { method: string; params: any }[] = [];
  return {
    calls,
    request: async (method: string, params: any = {}) => {
      calls.push({ method, params });
      return answer(method, params);
    },
  } as any;
}

describe('editing and deleting a role', () => {
  it('sends only what changed to profiles.update', async () => {
    const gw = fakeGw(() => ({ changed: ['model'], instances: ['writer-1'], restartRequired: ['writer-1'], restarted: [] }));
    const before = { role: 'writer', description: 'Writes', capabilities: ['write'], model: '' };
    const res = await updateRole(gw, before, { description: ' Writes ', capabilities: ['write'], model: 'tiny' });
    expect(gw.calls).toEqual([{ method: 'profiles.update', params: { role: 'writer', model: 'tiny' } }]);
    expect(res.restartRequired).toEqual(['writer-1']);
  });

  it('asks profiles.delete for a dry run, then deletes', async () => {
    const gw = fakeGw((_m, p) => ({ role: 'writer', path: 'memory/roles/writer', files: 3, notes: 2, kept: !p.deleteMemory, archivePath: p.dryRun ? '' : 'memory/archive/roles/writer' }));
    const plan = await deleteRole(gw, 'writer', false, true);
    expect(plan.files).toBe(3);
    expect(plan.archivePath).toBe('memory/archive/roles/writer');
    expect(plan.orphanedDevices).toEqual([]);
    await deleteRole(gw, 'writer', true, false);
    expect(gw.calls.map((c: any) => c.params)).toEqual([
      { role: 'writer', deleteMemory: false, dryRun: true },
      { role: 'writer', deleteMemory: true, dryRun: false },
    ]);
  });

  it('says every delete warning in both languages', () => {
    for (const k of Object.keys(MESSAGES).filter((k) => k.startsWith('profiles.delete') || k.startsWith('profiles.edit') || k.startsWith('editor.rename'))) {
      const [en, zh] = MESSAGES[k as keyof typeof MESSAGES];
      expect(en).not.toBe('');
      expect(zh).not.toBe(en);
    }
  });
});

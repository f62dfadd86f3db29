import { describe, expect, it } from 'vitest';
import { ROLE_TEMPLATES, roleNameProblem, splitCapabilities } from './roles';
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

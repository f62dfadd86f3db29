package chat

import "strings"

// mainPersona returns the persona of a run of main: the built-in persona
// followed by the standing context of Options.MainContext (an OpenClaw
// workspace's SOUL.md, IDENTITY.md, USER.md ...: issue 15, item 6). A
// context that cannot be read is logged and the run goes on with what was
// read, or with the built-in persona.
func (s *Service) mainPersona(rn *run) string {
	if s.opts.MainContext == nil {
		return mainPersona
	}
	text, err := s.opts.MainContext(rn.ctx)
	if err != nil {
		s.log.Warn("main agent context unreadable", "run", rn.RunID, "error", err.Error())
	}
	if text = strings.TrimSpace(text); text == "" {
		return mainPersona
	}
	return mainPersona + "\n\n" + text
}

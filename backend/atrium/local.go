package atrium

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/mcpserve"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/versions"
	"github.com/atrium-dev/atrium/backend/paths"
	"github.com/atrium-dev/atrium/backend/statedb"
)

// LocalMemory is the memory engine opened by a one-shot command (the
// CLI's `agents create`) when no app is running: the app's embedder and
// ranking (config.json) and its file versions in state.db, so that the
// command's writes count exactly as the app's would; its Guard (the ACL of
// memory/.acl, loaded once, and the audit log) checks and audits them as
// the app's does. No watcher runs.
type LocalMemory struct {
	*memory.Manager
	Guard *guard.Guard
	db    *sql.DB
}

// OpenLocalMemory opens the workspace's index and state.db like New does.
// It fails with memory.ErrLocked when a running app holds the index (ask
// the app instead). getenv nil means os.Getenv; log nil slog.Default().
func OpenLocalMemory(layout paths.Layout, getenv func(string) string, log *slog.Logger) (*LocalMemory, error) {
	if log == nil {
		log = slog.Default()
	}
	cfg, err := config.Load(layout.ConfigFile())
	if err != nil {
		return nil, err
	}
	emb, err := NewEmbedder(cfg.Memory.Embedding, getenv, log)
	if err != nil {
		return nil, err
	}
	db, err := statedb.Open(layout.StateDB())
	if err != nil {
		return nil, err
	}
	wsAbs, err := filepath.Abs(layout.Workspace)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("workspace: %w", err)
	}
	vs, err := versions.Open(db, versions.Options{Workspace: wsAbs})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("memory versions: %w", err)
	}
	l := &LocalMemory{db: db}
	l.Guard, err = NewGuard(layout, guard.OwnersFunc(func(id string) (string, bool) {
		if l.Manager == nil {
			return "", false
		}
		return l.Manager.SessionOwner(id)
	}), log)
	if err != nil {
		db.Close()
		return nil, err
	}
	l.Manager, err = memory.Open(memory.Options{
		Workspace:      layout.Workspace,
		IndexDir:       layout.IndexDir(),
		Embedder:       emb,
		Ranking:        MemoryRanking(cfg.Memory.Search),
		Logger:         log,
		DisableWatcher: true,
		Versions:       vs,
		Authorize:      l.Guard.Authorize,
		Readable:       l.Guard.ReadableFrom,
		ACL:            l.Guard.ACL().Policy,
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return l, nil
}

// Close closes the memory engine, then state.db.
func (l *LocalMemory) Close() error {
	return errors.Join(l.Manager.Close(), l.db.Close())
}

// MCPTokens opens the MCP clients' tokens in this state.db (mcpserve.Tokens;
// `atrium mcp token` when no app runs). They stay usable until Close.
func (l *LocalMemory) MCPTokens(ctx context.Context) (*mcpserve.Tokens, error) {
	return mcpserve.OpenTokens(ctx, l.db, mcpserve.TokensOptions{})
}

package main

import (
	"context"
	"log/slog"

	"github.com/streamd/streamd/internal/app"
	"github.com/streamd/streamd/internal/config"
)

// mountExtensions adds the journal and fluid HTTP routes to the admin
// server when they are configured.
func mountExtensions(ctx context.Context, a *app.App, cfg *config.Config, log *slog.Logger) error {
	return nil
}

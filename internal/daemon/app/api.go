package app

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/streamd/streamd/internal/daemon/admin"
)

// The control API under /v1/ (docs/operations.md). Reads are GET, every
// change a POST: the admin server's route table gives GET the read role
// and POST the write role when tokens are configured.
//
//	GET  /v1/status                        Status
//	GET  /v1/pipelines/{name}              PipelineStatus
//	POST /v1/reload                        ReloadResult (422 when the new config is refused,
//	                                       503 when busy or shutting down)
//	POST /v1/pipelines/{name}/pause        ControlResult
//	POST /v1/pipelines/{name}/resume       ControlResult
//	POST /v1/pipelines/{name}/restart      ControlResult (503 when busy or shutting down)
//
// Their answers (and /pipelines, /readyz's reasons) show what came into
// the config from ${ENV} and ${file:} as "<from ${...}>" (redact).
func (a *App) mountAPI() {
	admin.WithRedactor(a.redact)(a.Admin)
	a.Admin.Handle("GET /v1/status", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a.Admin.WriteRedactedJSON(w, http.StatusOK, a.Status())
	}))
	a.Admin.Handle("GET /v1/pipelines/{name}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, ps := range a.Status().Pipelines {
			if ps.Name == r.PathValue("name") {
				a.Admin.WriteRedactedJSON(w, http.StatusOK, ps)
				return
			}
		}
		writeError(w, http.StatusNotFound, ErrUnknownPipeline.Error()+" "+r.PathValue("name"))
	}))
	a.Admin.Handle("POST /v1/reload", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A reload that started finishes even if the client goes away.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Minute)
		defer cancel()
		res, err := a.Reload(ctx)
		switch {
		case errors.Is(err, errShuttingDown), errors.Is(err, ErrBusy):
			w.Header().Set("Retry-After", "1")
			a.Admin.WriteRedactedJSON(w, http.StatusServiceUnavailable, res)
		case err != nil:
			a.Admin.WriteRedactedJSON(w, http.StatusUnprocessableEntity, res)
		default:
			a.Admin.WriteRedactedJSON(w, http.StatusOK, res)
		}
	}))
	a.Admin.Handle("POST /v1/pipelines/{name}/{action}", http.HandlerFunc(a.control))
}

// ControlResult answers a pause, resume or restart.
type ControlResult struct {
	Pipeline string `json:"pipeline"`
	Action   string `json:"action"`
	// Changed is false when there was nothing to do (pausing a paused
	// pipeline).
	Changed bool            `json:"changed"`
	Status  *PipelineStatus `json:"status,omitempty"`
}

func (a *App) control(w http.ResponseWriter, r *http.Request) {
	name, action := r.PathValue("name"), r.PathValue("action")
	res := ControlResult{Pipeline: name, Action: action}
	var err error
	switch action {
	case "pause":
		res.Changed, err = a.Pause(name)
	case "resume":
		res.Changed, err = a.Resume(name)
	case "restart":
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Minute)
		defer cancel()
		err = a.Restart(ctx, name)
		res.Changed = err == nil
	default:
		writeError(w, http.StatusNotFound, "unknown action "+action+" (want pause, resume or restart)")
		return
	}
	switch {
	case errors.Is(err, ErrUnknownPipeline):
		writeError(w, http.StatusNotFound, err.Error())
		return
	case errors.Is(err, ErrNotRunning):
		writeError(w, http.StatusConflict, err.Error())
		return
	case errors.Is(err, errShuttingDown), errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusUnprocessableEntity, a.redact(err.Error()))
		return
	}
	for _, ps := range a.Status().Pipelines {
		if ps.Name == name {
			res.Status = &ps
		}
	}
	a.Admin.WriteRedactedJSON(w, http.StatusOK, res)
}

// redact hides in s what the running config took from ${ENV} and
// ${file:} (config.Config.Redact).
func (a *App) redact(s string) string { return a.config().Redact(s) }

func writeError(w http.ResponseWriter, code int, msg string) {
	admin.WriteJSON(w, code, map[string]string{"error": msg})
}

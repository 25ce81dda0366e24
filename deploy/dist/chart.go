package dist

import (
	"fmt"
	"path/filepath"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// Chart packages deploy/helm/streamd into outDir as `helm package` does,
// with the build's version as the chart's version and appVersion (so the
// image it deploys by default is this build's), and returns its path.
func (b Build) Chart(outDir string) (string, error) {
	ch, err := loader.LoadDir(filepath.Join(b.Root, "deploy", "helm", "streamd"))
	if err != nil {
		return "", fmt.Errorf("load the chart: %w", err)
	}
	ch.Metadata.Version = b.Version
	ch.Metadata.AppVersion = b.Version
	ch.StampModTimes(b.Epoch.UTC())
	return chartutil.Save(ch, outDir)
}

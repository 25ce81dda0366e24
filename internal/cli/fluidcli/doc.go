// Package fluidcli is `streamd fluid check|bridge`: a Fluid Messaging
// metadata folder checked (manifests, schemas, downgrades, Schema Registry
// subjects) and the fluid bridge run alone.
package fluidcli

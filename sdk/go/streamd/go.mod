module github.com/streamd/streamd/sdk/go/streamd

go 1.24

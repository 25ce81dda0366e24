//go:build !unix

package kafka

import (
	"errors"
	"os"
)

func tryLock(*os.File) (bool, error) {
	return false, errors.New("instance id slots need flock (unix only)")
}

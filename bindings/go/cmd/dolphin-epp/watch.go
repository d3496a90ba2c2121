package main

// Files the EPP follows (the endpoints file, the table file): polled for a change of size or modification time,
// so an edit, a rename over the file (how editors and Kubernetes ConfigMaps replace it) and a copy all count.

import (
	"os"
	"time"
)

type fileStamp struct {
	size int64
	mod  time.Time
}

func stampOf(path string) (fileStamp, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, false
	}
	return fileStamp{fi.Size(), fi.ModTime()}, true
}

// watchFile calls changed whenever the file at path changes, until stop closes; every interval it looks.
func watchFile(path string, interval time.Duration, stop <-chan struct{}, changed func()) {
	last, _ := stampOf(path)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			now, ok := stampOf(path)
			if ok && now != last {
				last = now
				changed()
			}
		}
	}
}

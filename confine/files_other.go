//go:build !linux

package confine

import (
	"errors"
	"os"
)

var errNoFileAccess = ErrNoFileLayer

// FileAccess is unavailable outside Linux in this build.
type FileAccess struct{}

func NewFileAccess(p *Policy, scratch string) (*FileAccess, error) { return nil, errNoFileAccess }
func NewFileAccessWith(p *Policy, scratch string, o FileAccessOptions) (*FileAccess, error) {
	return nil, errNoFileAccess
}

// errNotGrantable: see the Linux build.
var errNotGrantable = errors.New("not grantable")

func (fa *FileAccess) Grant(dir string) (*FileAccess, error) { return nil, errNoFileAccess }
func (fa *FileAccess) Close() error                          { return nil }
func (fa *FileAccess) Mode() Mode                            { return ModeOff }
func (fa *FileAccess) MaxReadBytes() int64                   { return defaultMaxReadBytes }
func (fa *FileAccess) MaxWriteBytes() int64                  { return defaultMaxWriteBytes }
func (fa *FileAccess) Scratch() string                       { return "" }
func (fa *FileAccess) RefreshDenylist()                      {}
func (fa *FileAccess) Resolve(path string) (abs, display string, err error) {
	return "", "", errNoFileAccess
}
func (fa *FileAccess) OpenRead(path string) (*os.File, Info, error) {
	return nil, Info{}, errNoFileAccess
}
func (fa *FileAccess) ReadFile(path string) ([]byte, Info, error) {
	return nil, Info{}, errNoFileAccess
}
func (fa *FileAccess) Stat(path string) (Info, error)  { return Info{}, errNoFileAccess }
func (fa *FileAccess) Lstat(path string) (Info, error) { return Info{}, errNoFileAccess }
func (fa *FileAccess) OpenDir(path string) (*Dir, error) {
	return nil, errNoFileAccess
}
func (fa *FileAccess) WriteFile(path string, data []byte, o WriteOptions) (bool, error) {
	return false, errNoFileAccess
}
func (fa *FileAccess) Remove(path string) error     { return errNoFileAccess }
func (fa *FileAccess) Rename(from, to string) error { return errNoFileAccess }
func (fa *FileAccess) NewStage() *Stage             { return &Stage{} }

// Dir is unavailable outside Linux in this build.
type Dir struct{}

func (d *Dir) Names(max int) ([]DirEntry, bool, error)   { return nil, false, errNoFileAccess }
func (d *Dir) Entries(max int) ([]DirEntry, bool, error) { return nil, false, errNoFileAccess }
func (d *Dir) OpenDir(name string) (*Dir, error)         { return nil, errNoFileAccess }
func (d *Dir) OpenFile(name string) (*os.File, error)    { return nil, errNoFileAccess }
func (d *Dir) Display() string                           { return "" }
func (d *Dir) Close() error                              { return nil }

// Stage is unavailable outside Linux in this build.
type Stage struct{}

func (s *Stage) Write(path string, data []byte, o WriteOptions) error { return errNoFileAccess }
func (s *Stage) Delete(path string) error                             { return errNoFileAccess }
func (s *Stage) Commit() error                                        { return errNoFileAccess }
func (s *Stage) Abort()                                               {}

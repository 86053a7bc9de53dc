package search
import "bytes"
func bytesIndex(d []byte) bool { return bytes.Index(d, []byte("func main")) >= 0 }

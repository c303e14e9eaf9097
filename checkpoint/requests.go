package checkpoint

import (
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Blob request operations, as BlobOptions.OnRequest names them. Each is
// one billed request (Blob Storage prices writes, lists and reads per
// 10,000); together they are what a partition costs in the store.
const (
	opList        = "list"         // list blobs (ownership or checkpoints of a consumer group)
	opSetMetadata = "set_metadata" // a lease claimed or renewed, a checkpoint written over an existing one
	opUpload      = "upload"       // a blob created (a first lease or checkpoint)
	opGet         = "get"          // a blob or its properties read
	opDelete      = "delete"       // a blob removed
	opContainer   = "container"    // the container created or read (at start)
	opOther       = "other"        // anything else
)

// blobOp names the operation of a Blob REST request by its method and
// its comp and restype parameters, as the service's pricing does.
func blobOp(req *http.Request) string {
	q := req.URL.Query()
	comp, restype := q.Get("comp"), q.Get("restype")
	switch {
	case comp == "list":
		return opList
	case restype == "container":
		return opContainer
	case req.Method == http.MethodPut && comp == "metadata":
		return opSetMetadata
	case req.Method == http.MethodPut && comp == "":
		return opUpload
	case req.Method == http.MethodGet || req.Method == http.MethodHead:
		return opGet
	case req.Method == http.MethodDelete:
		return opDelete
	}
	return opOther
}

// requestCounter is a per-try pipeline policy: every request sent to the
// service is counted, retries included, since each is billed.
type requestCounter func(op string)

func (c requestCounter) Do(req *policy.Request) (*http.Response, error) {
	c(blobOp(req.Raw()))
	return req.Next()
}

package emulator_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
)

// Example runs an emulator in-process and uses it with the real SDK:
// send one event, then read it back from the earliest position.
func Example() {
	ctx := context.Background()
	srv, err := emulator.Start(ctx, emulator.Config{
		Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(ctx)

	producer, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString("orders"), "", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close(ctx)
	batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: new("0")})
	if err != nil {
		log.Fatal(err)
	}
	if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte(`{"order_id":1}`)}, nil); err != nil {
		log.Fatal(err)
	}
	if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
		log.Fatal(err)
	}

	consumer, err := azeventhubs.NewConsumerClientFromConnectionString(srv.ConnectionString("orders"), "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close(ctx)
	pc, err := consumer.NewPartitionClient("0", &azeventhubs.PartitionClientOptions{
		StartPosition: azeventhubs.StartPosition{Earliest: new(true)},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pc.Close(ctx)
	events, err := pc.ReceiveEvents(ctx, 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(events[0].SequenceNumber, string(events[0].Body))
	// Output: 0 {"order_id":1}
}

// Example_schemaRegistry registers an Avro schema with the emulator's Azure
// Schema Registry over HTTPS, trusting the emulator's certificate, and
// reads it back by the id it got.
func Example_schemaRegistry() {
	ctx := context.Background()
	srv, err := emulator.Start(ctx, emulator.Config{SchemaRegistryAddr: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(ctx)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(srv.CertificatePEM())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	base := "https://" + srv.SchemaRegistryAddr()

	schema := `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`
	req, err := http.NewRequest("PUT", base+"/$schemaGroups/shop/schemas/Order?api-version=2023-07-01", strings.NewReader(schema))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; serialization=Avro")
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get("Schema-Id")
	fmt.Println(resp.StatusCode, len(id), resp.Header.Get("Schema-Version"))

	resp, err = client.Get(base + "/$schemaGroups/$schemas/" + id + "?api-version=2023-07-01")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, string(body) == schema)
	// Output:
	// 204 32 1
	// 200 true
}

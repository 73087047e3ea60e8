// mesos-go (Debian's golang-github-mesos-mesos-go-dev, its v1 HTTP API) with a
// principal and secret (HTTP basic on every call), run unchanged against
// localmesos with framework authentication by tests/mesos_auth_localmesos.rs:
// subscribe, launch one command task, print every status update, exit once
// it finished. Arguments: MASTER_ADDR PRINCIPAL SECRET.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	mesos "github.com/mesos/mesos-go/api/v1/lib"
	"github.com/mesos/mesos-go/api/v1/lib/encoding/codecs"
	"github.com/mesos/mesos-go/api/v1/lib/httpcli"
	"github.com/mesos/mesos-go/api/v1/lib/httpcli/httpsched"
	"github.com/mesos/mesos-go/api/v1/lib/scheduler"
	"github.com/mesos/mesos-go/api/v1/lib/scheduler/calls"
)

func scalar(name string, v float64) mesos.Resource {
	return mesos.Resource{Name: name, Type: mesos.SCALAR.Enum(), Scalar: &mesos.Value_Scalar{Value: v}}
}

func run(master, principal, secret string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := httpcli.New(
		httpcli.Endpoint("http://"+master+"/api/v1/scheduler"),
		httpcli.Codec(codecs.ByMediaType[codecs.MediaTypeProtobuf]),
		httpcli.Do(httpcli.With(httpcli.BasicAuth(principal, secret), httpcli.Timeout(30*time.Second))),
	)
	caller := httpsched.NewCaller(cli)
	user, name := "nobody", "mesos-go-auth"
	info := &mesos.FrameworkInfo{User: user, Name: name, Principal: &principal}
	resp, err := caller.Call(ctx, calls.Subscribe(info))
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer resp.Close()
	var frameworkID string
	launched := false
	for {
		var e scheduler.Event
		if err := resp.Decode(&e); err != nil {
			return fmt.Errorf("event stream: %w", err)
		}
		switch e.GetType() {
		case scheduler.Event_SUBSCRIBED:
			frameworkID = e.GetSubscribed().FrameworkID.GetValue()
			fmt.Println("REGISTERED", frameworkID)
		case scheduler.Event_OFFERS:
			for _, offer := range e.GetOffers().Offers {
				if launched {
					if _, err := caller.Call(ctx, calls.Decline(offer.ID).With(calls.Framework(frameworkID))); err != nil {
						return fmt.Errorf("decline: %w", err)
					}
					continue
				}
				command := "echo authenticated"
				task := mesos.TaskInfo{
					Name:      "mesos-go auth task",
					TaskID:    mesos.TaskID{Value: "mesos-go-auth-task"},
					AgentID:   offer.AgentID,
					Command:   &mesos.CommandInfo{Value: &command},
					Resources: []mesos.Resource{scalar("cpus", 0.1), scalar("mem", 32)},
				}
				accept := calls.Accept(calls.OfferOperations{calls.OpLaunch(task)}.WithOffers(offer.ID))
				if _, err := caller.Call(ctx, accept.With(calls.Framework(frameworkID))); err != nil {
					return fmt.Errorf("accept: %w", err)
				}
				launched = true
			}
		case scheduler.Event_UPDATE:
			status := e.GetUpdate().GetStatus()
			fmt.Println("STATE", status.GetState().String())
			if uuid := status.GetUUID(); len(uuid) > 0 {
				ack := calls.Acknowledge(status.GetAgentID().GetValue(), status.TaskID.GetValue(), uuid)
				if _, err := caller.Call(ctx, ack.With(calls.Framework(frameworkID))); err != nil {
					return fmt.Errorf("acknowledge: %w", err)
				}
			}
			if status.GetState() == mesos.TASK_FINISHED {
				return nil
			}
		case scheduler.Event_ERROR:
			return fmt.Errorf("error event: %s", e.GetError().GetMessage())
		}
	}
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: mesosgoauth MASTER PRINCIPAL SECRET")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		fmt.Println("FAILED")
		os.Exit(1)
	}
	fmt.Println("DONE")
}

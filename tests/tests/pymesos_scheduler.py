"""A plain pymesos scheduler, run unchanged against localmesos by
tests/pymesos_interop.rs: subscribe, take an offer, launch one command task,
and report every status update (pymesos acknowledges them itself)."""
import sys
import threading

from addict import Dict
from pymesos import MesosSchedulerDriver, Scheduler


class OneTask(Scheduler):
    def __init__(self):
        self.launched = False
        self.done = threading.Event()

    def registered(self, driver, framework_id, master_info):
        print("REGISTERED", framework_id["value"], flush=True)

    def resourceOffers(self, driver, offers):
        for offer in offers:
            if self.launched:
                driver.declineOffer(offer.id)
                continue
            task = Dict()
            task.task_id.value = "pymesos-task"
            task.agent_id.value = offer.agent_id.value
            task.name = "pymesos task"
            task.command.value = "echo hello from pymesos"
            task.resources = [
                dict(name="cpus", type="SCALAR", scalar={"value": 0.1}),
                dict(name="mem", type="SCALAR", scalar={"value": 32}),
            ]
            driver.launchTasks(offer.id, [task])
            self.launched = True
            print("LAUNCHED", offer.agent_id.value, flush=True)

    def statusUpdate(self, driver, update):
        print("STATE", update.state, "uuid" in update, flush=True)
        if update.state == "TASK_FINISHED":
            self.done.set()


def main():
    master = sys.argv[1]
    framework = Dict()
    framework.user = "nobody"
    framework.name = "pymesos-interop"
    framework.hostname = "localhost"
    sched = OneTask()
    driver = MesosSchedulerDriver(sched, framework, master, use_addict=True)
    driver.start()
    ok = sched.done.wait(30)
    # The test checks the acknowledgements while we are still subscribed,
    # then tells us to stop by closing our stdin.
    sys.stdin.read()
    driver.stop()
    driver.join()
    print("DONE" if ok else "TIMEOUT", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""pymesos with a principal and secret (HTTP basic on every call), run
unchanged against localmesos with framework authentication by
tests/mesos_auth_localmesos.rs: subscribe, launch one command task, print
every status update, exit once it finished."""
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
            task.task_id.value = "pymesos-auth-task"
            task.agent_id.value = offer.agent_id.value
            task.name = "pymesos auth task"
            task.command.value = "echo authenticated"
            task.resources = [
                dict(name="cpus", type="SCALAR", scalar={"value": 0.1}),
                dict(name="mem", type="SCALAR", scalar={"value": 32}),
            ]
            driver.launchTasks(offer.id, [task])
            self.launched = True

    def statusUpdate(self, driver, update):
        print("STATE", update.state, flush=True)
        if update.state == "TASK_FINISHED":
            self.done.set()


def main():
    master, principal, secret = sys.argv[1], sys.argv[2], sys.argv[3]
    framework = Dict()
    framework.user = "nobody"
    framework.name = "pymesos-auth"
    framework.hostname = "localhost"
    sched = OneTask()
    driver = MesosSchedulerDriver(
        sched, framework, master, use_addict=True, principal=principal, secret=secret
    )
    driver.start()
    ok = sched.done.wait(30)
    driver.stop()
    driver.join()
    print("DONE" if ok else "TIMEOUT", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

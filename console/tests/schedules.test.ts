import { describe, expect, it } from "vitest";
import { ApiError } from "../src/api";
import { describeRule, runNowError, taskBody, whenIn, type TaskForm } from "../src/schedules";

describe("describeRule", () => {
  it("says the common rules in words", () => {
    expect(describeRule("FREQ=DAILY;BYHOUR=9;BYMINUTE=0")).toBe("Every day at 09:00");
    expect(describeRule("FREQ=DAILY")).toBe("Every day at 00:00"); // anchored at midnight
    expect(describeRule("RRULE:FREQ=DAILY;INTERVAL=2;BYHOUR=17;BYMINUTE=30")).toBe("Every 2 days at 17:30");
    expect(describeRule("FREQ=DAILY;BYHOUR=17,9;BYMINUTE=0,30")).toBe("Every day at 09:00, 09:30, 17:00 and 17:30");
    expect(describeRule("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8")).toBe("Every weekday at 08:00");
    expect(describeRule("FREQ=WEEKLY;BYDAY=FR,MO;BYHOUR=8")).toBe("Every Monday and Friday at 08:00");
    expect(describeRule("FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=10")).toBe("Every 2 weeks on Tuesday at 10:00");
    expect(describeRule("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR,SA,SU;BYHOUR=6")).toBe("Every day at 06:00");
    expect(describeRule("FREQ=MINUTELY;INTERVAL=15")).toBe("Every 15 minutes");
    expect(describeRule("FREQ=MINUTELY")).toBe("Every minute");
    expect(describeRule("FREQ=HOURLY")).toBe("Every hour at :00");
    expect(describeRule("freq=hourly;interval=3;byminute=5")).toBe("Every 3 hours at :05");
    expect(describeRule("FREQ=MONTHLY;BYDAY=1MO")).toBe("Monthly on the first Monday at 00:00");
    expect(describeRule("FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=16")).toBe("Monthly on the last Friday at 16:00");
    expect(describeRule("FREQ=MONTHLY;BYMONTHDAY=1,15;BYHOUR=9")).toBe("Monthly on day 1 and 15 at 09:00");
    expect(describeRule("FREQ=MONTHLY;INTERVAL=3;BYMONTHDAY=-1")).toBe("Every 3 months on the last day at 00:00");
  });

  it("gives up (the RRULE is shown) rather than say less than the rule", () => {
    for (const rule of [
      "FREQ=DAILY;COUNT=5",
      "FREQ=DAILY;UNTIL=20270101T000000Z",
      "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=1",
      "FREQ=YEARLY;BYMONTH=3",
      "FREQ=WEEKLY;BYHOUR=9", // its day is the anchor's, which the console does not know
      "FREQ=WEEKLY;BYDAY=1MO",
      "FREQ=HOURLY;BYMINUTE=0,30",
      "FREQ=MINUTELY;BYHOUR=9",
      "FREQ=DAILY;BYHOUR=25",
      "FREQ=DAILY;BYHOUR=9,",
      "FREQ=DAILY;BYSECOND=30",
      "FREQ=DAILY;INTERVAL=0",
      "FREQ=DAILY;BYHOUR=1,2,3,4,5,6,7",
      "FREQ=SECONDLY",
      "",
      "nonsense",
      "FREQ=DAILY;BYHOUR",
    ]) {
      expect(describeRule(rule), rule).toBeNull();
    }
  });
});

describe("whenIn", () => {
  it("shows an instant on the task zone's wall clock", () => {
    const berlin = whenIn("2027-03-28T09:00:00+02:00", "Europe/Berlin");
    expect(berlin).toContain("2027");
    expect(berlin).toMatch(/9:00|09:00/);
    expect(whenIn("2027-03-28T09:00:00+02:00", "UTC")).toMatch(/7:00|07:00/);
    expect(whenIn(1_806_217_200, "UTC")).toBe(whenIn("2027-03-28T07:00:00Z", "UTC")); // epoch seconds
  });

  it("is empty without an instant and survives an unknown zone or text", () => {
    expect(whenIn(null, "UTC")).toBe("");
    expect(whenIn(undefined, "UTC")).toBe("");
    expect(whenIn("2027-03-28T09:00:00+02:00", "Nowhere/Atlantis")).toContain("2027");
    expect(whenIn("not a date", "UTC")).toBe("not a date");
  });
});

describe("taskBody", () => {
  const form: TaskForm = {
    name: " Nightly ",
    agent_id: "agent_1",
    prompt: " Summarize ",
    rrule: "RRULE:FREQ=DAILY;BYHOUR=9",
    timezone: "Europe/Berlin",
    max_cost_usd: "",
  };

  it("trims and leaves the cap out when empty", () => {
    expect(taskBody(form)).toEqual({
      name: "Nightly",
      agent_id: "agent_1",
      prompt: "Summarize",
      rrule: "FREQ=DAILY;BYHOUR=9",
      timezone: "Europe/Berlin",
    });
    expect(taskBody({ ...form, timezone: " " })).toMatchObject({ timezone: "UTC" });
  });

  it("sends a cap as a number above 0", () => {
    expect(taskBody({ ...form, max_cost_usd: "0.5" })).toMatchObject({ max_cost_usd: 0.5 });
    expect(taskBody({ ...form, max_cost_usd: "0" })).toMatch(/above 0/);
    expect(taskBody({ ...form, max_cost_usd: "abc" })).toMatch(/above 0/);
  });

  it("names what is missing", () => {
    expect(taskBody({ ...form, name: "  " })).toMatch(/name/);
    expect(taskBody({ ...form, agent_id: "" })).toMatch(/agent/);
    expect(taskBody({ ...form, prompt: "" })).toMatch(/prompt/);
    expect(taskBody({ ...form, rrule: "RRULE:" })).toMatch(/rule/);
  });
});

describe("runNowError", () => {
  it("says a 409 in words, a quota with the server's reason, anything else as it came", () => {
    const busy = new ApiError(409, "conflict", "a run of this scheduled task is already in flight (abc)");
    expect(runNowError(busy, "Nightly")).toBe(
      "Nightly is already running: run it again once its current run has finished.",
    );
    const quota = new ApiError(429, "quota_exceeded", "runs per hour");
    expect(runNowError(quota, "Nightly")).toBe("Nightly did not run: runs per hour");
    expect(runNowError(new Error("offline"), "Nightly")).toBe("offline");
  });
});

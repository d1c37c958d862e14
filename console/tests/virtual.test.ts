import { describe, expect, it } from "vitest";
import { HeightIndex } from "../src/virtual";

describe("HeightIndex", () => {
  it("renders only the rows in view of 5,000", () => {
    const h = new HeightIndex(50);
    h.resize(5000);
    expect(h.total()).toBe(250_000);
    expect(h.range(0, 500, 2)).toEqual([0, 13]);
    expect(h.range(100_000, 500, 2)).toEqual([1998, 2013]);
    expect(h.range(250_000, 500, 2)).toEqual([4998, 5000]);
  });

  it("uses measured heights and keeps them when rows are prepended", () => {
    const h = new HeightIndex(50);
    h.resize(3);
    h.set(0, 100);
    expect(h.offset(1)).toBe(100);
    expect(h.indexAt(120)).toBe(1);
    h.prepend(2);
    h.resize(5);
    expect(h.offset(3)).toBe(200); // two estimated rows, then the measured 100
    expect(h.total()).toBe(300);
  });
});

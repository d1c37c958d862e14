// Windowing for long lists: only the rows near the viewport are in the DOM. Heights are measured
// once rendered and estimated before; offsets are prefix sums, found by binary search.

export class HeightIndex {
  private heights: number[] = [];
  private offsets: number[] = [0];
  private dirtyFrom = 0;

  constructor(private readonly estimate: number) {}

  resize(count: number): void {
    if (count === this.heights.length) return;
    if (count < this.heights.length) this.heights.length = count;
    else while (this.heights.length < count) this.heights.push(this.estimate);
    this.dirtyFrom = 0;
  }

  /** Record a measured height; returns whether it changed. */
  set(index: number, height: number): boolean {
    if (index >= this.heights.length || this.heights[index] === height) return false;
    this.heights[index] = height;
    this.dirtyFrom = Math.min(this.dirtyFrom, index);
    return true;
  }

  /** Prepended rows shift every index: keep the measured heights of the old rows. */
  prepend(count: number): void {
    this.heights = [...new Array<number>(count).fill(this.estimate), ...this.heights];
    this.dirtyFrom = 0;
  }

  private settle(): void {
    if (this.offsets.length === this.heights.length + 1 && this.dirtyFrom >= this.heights.length) return;
    this.offsets.length = this.heights.length + 1;
    for (let i = this.dirtyFrom; i < this.heights.length; i++) this.offsets[i + 1] = (this.offsets[i] ?? 0) + (this.heights[i] ?? 0);
    this.dirtyFrom = this.heights.length;
  }

  offset(index: number): number {
    this.settle();
    return this.offsets[Math.min(index, this.heights.length)] ?? 0;
  }

  total(): number {
    return this.offset(this.heights.length);
  }

  /** The first row whose bottom is below `y`. */
  indexAt(y: number): number {
    this.settle();
    let lo = 0;
    let hi = this.heights.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.offsets[mid + 1] ?? 0) <= y) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Rows [start, end) to render for a viewport at `scrollTop` of `height`, with `overscan` rows each side. */
  range(scrollTop: number, height: number, overscan: number): [number, number] {
    const count = this.heights.length;
    if (count === 0) return [0, 0];
    const start = Math.max(0, this.indexAt(scrollTop) - overscan);
    const end = Math.min(count, this.indexAt(scrollTop + height) + 1 + overscan);
    return [start, end];
  }
}

import type { ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { HeightIndex } from "../virtual";

interface Props<T> {
  items: T[];
  version: number;
  keyOf: (item: T) => string;
  render: (item: T) => ComponentChildren;
  label: string;
  estimate?: number;
  overscan?: number;
  /** Called when the user scrolls near the top (load older rows). */
  onNearTop?: () => void;
}

const STICK_PX = 48;

/**
 * A scroll region that renders only the rows near its viewport, measures them once shown, follows
 * the bottom while the user is there (streaming text), and keeps the view still when older rows
 * are prepended.
 */
export function VirtualList<T>(props: Props<T>) {
  const { items, keyOf } = props;
  const scroller = useRef<HTMLDivElement>(null);
  const heights = useRef(new HeightIndex(props.estimate ?? 64));
  const previous = useRef<{ first: string | null; count: number }>({ first: null, count: 0 });
  const stick = useRef(true);
  const pendingShift = useRef(0);
  const [viewport, setViewport] = useState({ top: 0, height: 800 });
  const [, setMeasured] = useState(0);

  // Older rows came in at the top: shift the measured heights with them, keep the view where it was.
  const first = items.length > 0 && items[0] !== undefined ? keyOf(items[0]) : null;
  const prev = previous.current;
  if (prev.first !== null && first !== prev.first && items.length > prev.count) {
    const at = items.findIndex((item) => keyOf(item) === prev.first);
    if (at > 0) {
      heights.current.prepend(at);
      pendingShift.current += heights.current.offset(at);
    }
  }
  heights.current.resize(items.length);
  previous.current = { first, count: items.length };

  const [start, end] = heights.current.range(viewport.top, viewport.height, props.overscan ?? 6);
  const top = heights.current.offset(start);
  const bottom = heights.current.total() - heights.current.offset(end);

  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    let changed = false;
    for (const row of Array.from(el.querySelectorAll<HTMLElement>("[data-index]"))) {
      const index = Number(row.dataset.index);
      if (heights.current.set(index, row.offsetHeight)) changed = true;
    }
    if (pendingShift.current) {
      el.scrollTop += pendingShift.current;
      pendingShift.current = 0;
    }
    if (stick.current) el.scrollTop = el.scrollHeight;
    if (changed) setMeasured((n) => n + 1);
  });

  useEffect(() => {
    const el = scroller.current;
    if (!el) return;
    const observer = new ResizeObserver(() => setViewport({ top: el.scrollTop, height: el.clientHeight }));
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  const onScroll = (): void => {
    const el = scroller.current;
    if (!el) return;
    stick.current = el.scrollTop + el.clientHeight >= el.scrollHeight - STICK_PX;
    setViewport({ top: el.scrollTop, height: el.clientHeight });
    if (el.scrollTop < 400) props.onNearTop?.();
  };

  return (
    <div class="scroller" ref={scroller} onScroll={onScroll} role="region" aria-label={props.label} tabIndex={0}>
      <ol class="rows" style={{ paddingTop: `${top}px`, paddingBottom: `${bottom}px` }}>
        {items.slice(start, end).map((item, i) => (
          <li key={keyOf(item)} data-index={start + i} data-key={keyOf(item)}>
            {props.render(item)}
          </li>
        ))}
      </ol>
    </div>
  );
}

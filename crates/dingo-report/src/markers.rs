//! Where the labels of a line chart's event markers go: each label starts
//! at its event's x and runs to the right, so events close in time (the
//! demo starts four within its first tenth) would print over each other on
//! one line. Labels are stacked in rows instead, each in the first row
//! where it clears the labels already there.

/// Horizontal room, in pixels, kept between two labels in one row.
const GAP_PX: f64 = 6.0;

/// The row (0 = top) of each label, given each label's left edge and
/// width in pixels, in the markers' order. Invariant: two labels in the
/// same row never overlap (nor come closer than a few pixels) unless
/// `max_rows` rows are all taken at that x, in which case the label goes to
/// the row whose last label ends first (the least overlap).
pub fn label_rows(labels_px: &[(f64, f64)], max_rows: usize) -> Vec<usize> {
    let max_rows = max_rows.max(1);
    // Labels are placed left to right, whatever order the markers came in.
    let mut order: Vec<usize> = (0..labels_px.len()).collect();
    order.sort_by(|&a, &b| labels_px[a].0.total_cmp(&labels_px[b].0));
    // The right edge of the last label placed in each row.
    let mut row_ends: Vec<f64> = Vec::new();
    let mut rows = vec![0; labels_px.len()];
    for i in order {
        let (left, width) = labels_px[i];
        let row = match row_ends.iter().position(|&end| end + GAP_PX <= left) {
            Some(row) => row,
            None if row_ends.len() < max_rows => {
                row_ends.push(f64::MIN);
                row_ends.len() - 1
            }
            None => (0..row_ends.len()).min_by(|&a, &b| row_ends[a].total_cmp(&row_ends[b])).unwrap_or(0),
        };
        row_ends[row] = left + width;
        rows[i] = row;
    }
    rows
}

/// Where a label of `width` pixels starting at `left` goes so that it ends
/// by `right_limit` (the legend's left edge: the legend box hides what
/// runs under it): `left` itself if it fits, else as far left as needed
/// (never before 0). Returns the new left edge and whether it moved.
pub fn clear_of(left: f64, width: f64, right_limit: f64) -> (f64, bool) {
    if left + width <= right_limit { (left, false) } else { ((right_limit - width).max(0.0), true) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlap(a: (f64, f64), b: (f64, f64)) -> bool {
        a.0 < b.0 + b.1 + GAP_PX && b.0 < a.0 + a.1 + GAP_PX
    }

    #[test]
    fn labels_near_the_start_get_rows_of_their_own() {
        // The demo's first events: transcoding at 0, GC at 5 %, a new node
        // at 10 %, then transcoding at 20 %, on a plot 900 px wide.
        let labels = [(0.0, 150.0), (45.0, 180.0), (90.0, 110.0), (180.0, 150.0), (450.0, 100.0)];
        let rows = label_rows(&labels, 6);
        assert_eq!(rows, vec![0, 1, 2, 0, 0]);
        for i in 0..labels.len() {
            for j in 0..i {
                assert!(rows[i] != rows[j] || !overlap(labels[i], labels[j]), "{i} and {j} overlap in one row");
            }
        }
    }

    #[test]
    fn markers_out_of_order_are_placed_left_to_right() {
        let rows = label_rows(&[(300.0, 50.0), (0.0, 400.0), (10.0, 20.0)], 4);
        assert_eq!(rows, vec![1, 0, 1], "the late short label fits after the early short one");
    }

    #[test]
    fn with_every_row_taken_the_label_goes_where_the_overlap_is_least() {
        let rows = label_rows(&[(0.0, 500.0), (10.0, 100.0), (20.0, 100.0)], 2);
        assert_eq!(rows, vec![0, 1, 1]);
        assert_eq!(label_rows(&[], 3), Vec::<usize>::new());
    }

    #[test]
    fn a_label_that_would_run_under_the_legend_ends_before_it() {
        assert_eq!(clear_of(100.0, 50.0, 700.0), (100.0, false));
        assert_eq!(clear_of(680.0, 50.0, 700.0), (650.0, true));
        assert_eq!(clear_of(10.0, 900.0, 700.0), (0.0, true), "never left of the plot");
    }
}

//! A one-line spinner on stderr (`⠋ thinking…`) while the model or a tool works.
//!
//! A tokio task redraws it about ten times a second. Every draw and every erase happens
//! under one lock, so once [`Spinner::pause`] returns the line is clean and stays clean
//! until the spinner is shown again: the caller can print right away.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(100);
/// Back to the line's start, then clear the whole line.
const ERASE: &str = "\r\x1b[2K";

struct State {
    out: Box<dyn Write + Send>,
    /// What the spinner says; hidden when `None`.
    label: Option<String>,
    /// Whether the line currently shows the spinner.
    drawn: bool,
    frame: usize,
    /// Longest line to draw, so the line never wraps (a wrapped line cannot be erased).
    width: usize,
}

impl State {
    fn draw(&mut self) {
        let Some(label) = &self.label else { return };
        let frame = FRAMES[self.frame % FRAMES.len()];
        let label: String = label.chars().take(self.width.saturating_sub(3)).collect();
        let _ = write!(self.out, "{ERASE}\x1b[36m{frame}\x1b[0m \x1b[2m{label}\x1b[0m");
        let _ = self.out.flush();
        self.drawn = true;
    }

    fn erase(&mut self) {
        if self.drawn {
            let _ = write!(self.out, "{ERASE}");
            let _ = self.out.flush();
            self.drawn = false;
        }
    }
}

/// A running spinner; hidden until [`Spinner::show`]. Erased when dropped.
pub struct Spinner {
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Spinner {
    /// Starts a hidden spinner drawing on stderr, at most `width` columns wide.
    pub fn on_stderr(width: usize) -> Spinner {
        Spinner::with_writer(Box::new(std::io::stderr()), width)
    }

    /// Starts a hidden spinner drawing on `out`. Needs a tokio runtime.
    pub fn with_writer(out: Box<dyn Write + Send>, width: usize) -> Spinner {
        let state = Arc::new(Mutex::new(State { out, label: None, drawn: false, frame: 0, width }));
        let ticking = state.clone();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(TICK);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                ticks.tick().await;
                let mut state = ticking.lock().unwrap_or_else(PoisonError::into_inner);
                if state.label.is_some() {
                    state.frame = state.frame.wrapping_add(1);
                    state.draw();
                }
            }
        });
        Spinner { state, task }
    }

    /// Shows the spinner with `label` (drawn at once when it was hidden or says something else).
    pub fn show(&self, label: &str) {
        let mut state = self.lock();
        if state.label.as_deref() == Some(label) && state.drawn {
            return;
        }
        state.label = Some(label.to_owned());
        state.draw();
    }

    /// Shows the spinner with `label` from the next tick on (about 0.1 s): output that
    /// follows quickly, such as the next line of a reply, then needs no erase.
    pub fn show_soon(&self, label: &str) {
        let mut state = self.lock();
        if state.label.as_deref() != Some(label) {
            state.label = Some(label.to_owned());
            if state.drawn {
                state.draw();
            }
        }
    }

    /// Hides the spinner; the line is clean when this returns.
    pub fn pause(&self) {
        let mut state = self.lock();
        state.label = None;
        state.erase();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.task.abort();
        self.pause();
    }
}

#[cfg(test)]
mod tests {
    // Time is paused in every test: tokio moves the clock straight to the next timer whenever
    // the runtime is idle, so ticks land exactly where the sleeps put them, however busy the
    // machine is.
    use super::*;

    /// A writer whose output the test can read.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_hidden_spinner_draws_nothing() {
        let out = Captured::default();
        let spinner = Spinner::with_writer(Box::new(out.clone()), 80);
        tokio::time::sleep(Duration::from_millis(250)).await;
        drop(spinner);
        assert_eq!(out.text(), "");
    }

    #[tokio::test(start_paused = true)]
    async fn a_shown_spinner_draws_at_once_and_keeps_turning() {
        let out = Captured::default();
        let spinner = Spinner::with_writer(Box::new(out.clone()), 80);
        spinner.show("thinking…");
        assert!(out.text().contains("⠋"), "drawn at once: {:?}", out.text());
        tokio::time::sleep(Duration::from_millis(350)).await;
        let text = out.text();
        assert!(text.matches("thinking…").count() >= 3, "redrawn on every tick: {text:?}");
        assert!(text.contains('⠙') && text.contains('⠹'), "frames advance: {text:?}");
        drop(spinner);
    }

    #[tokio::test(start_paused = true)]
    async fn pausing_leaves_a_clean_line_and_stops_drawing() {
        let out = Captured::default();
        let spinner = Spinner::with_writer(Box::new(out.clone()), 80);
        spinner.show("running read_file…");
        tokio::time::sleep(Duration::from_millis(150)).await;
        spinner.pause();
        let paused = out.text();
        assert!(paused.ends_with(ERASE), "{paused:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(out.text(), paused, "nothing drawn while paused");
        spinner.pause();
        assert_eq!(out.text(), paused, "a second pause writes nothing");
    }

    #[tokio::test(start_paused = true)]
    async fn show_soon_waits_for_the_next_tick() {
        let out = Captured::default();
        let spinner = Spinner::with_writer(Box::new(out.clone()), 80);
        // The interval's first tick is immediate; let it pass.
        tokio::time::sleep(Duration::from_millis(20)).await;
        spinner.show_soon("writing…");
        assert_eq!(out.text(), "", "not drawn at once");
        spinner.pause();
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(out.text(), "", "paused before the tick: never drawn");
        spinner.show_soon("writing…");
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(out.text().contains("writing…"), "{:?}", out.text());
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_a_visible_spinner_erases_it() {
        let out = Captured::default();
        let spinner = Spinner::with_writer(Box::new(out.clone()), 80);
        spinner.show("thinking…");
        drop(spinner);
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(out.text().ends_with(ERASE), "{:?}", out.text());
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_label_is_drawn_at_once_and_long_labels_are_cut_to_the_width() {
        let out = Captured::default();
        let spinner = Spinner::with_writer(Box::new(out.clone()), 12);
        spinner.show("thinking…");
        spinner.show("running a_very_long_tool_name…");
        let text = out.text();
        assert!(text.contains("running a"), "{text:?}");
        assert!(!text.contains("running a_"), "cut to fit 12 columns: {text:?}");
    }
}

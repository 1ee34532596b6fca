//! Your own actor kind: a ticket desk that bots file tickets with through
//! `message_agent`, and that keeps its tickets across a restart.
//!
//! `Desk` implements `troupe::UserActor`: a message enum, a reply, a state
//! (all serde) and one `handle` method. `register_with` puts its kind
//! under troupe's supervisor and offers it to bots (it is in their roster
//! with the description given); `ActorAddress` names one desk by key.
//! A scripted model has the assistant file a ticket; the desk's answer
//! comes back to the assistant as a durable notice. The program then
//! files one itself with `send_durable`, stops the runtime, starts a new
//! one on the same home, and the desk — activated from its stored state —
//! still lists both tickets.
//!
//! Run it with:
//!
//! ```sh
//! cargo run --example custom_actor
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::{ActorError, AgentEvent, Context, KindOptions, Runtime, UserActor};

/// A ticket.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Ticket {
    id: u64,
    by: String,
    text: String,
}

/// What the desk takes.
#[derive(Debug, Serialize, Deserialize)]
enum DeskMsg {
    /// File a ticket.
    File { by: String, text: String },
    /// List the open tickets.
    List,
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for DeskMsg {}

/// What it answers.
#[derive(Debug, Serialize, Deserialize)]
enum DeskReply {
    Filed(u64),
    Tickets(Vec<Ticket>),
}

/// Its state, kept by troupe.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Tickets {
    next: u64,
    open: Vec<Ticket>,
}

/// The ticket desk.
struct Desk;

#[troupe::async_trait]
impl UserActor for Desk {
    type Msg = DeskMsg;
    type Reply = DeskReply;
    type State = Tickets;

    async fn handle(
        &self,
        cx: &mut Context<'_, Self>,
        msg: DeskMsg,
    ) -> Result<DeskReply, ActorError> {
        match msg {
            DeskMsg::File { by, text } => {
                if text.trim().is_empty() {
                    return Err("the ticket is empty: say what is wrong".into());
                }
                let tickets = cx.state_mut();
                tickets.next += 1;
                let id = tickets.next;
                tickets.open.push(Ticket { id, by, text });
                cx.save();
                Ok(DeskReply::Filed(id))
            }
            DeskMsg::List => Ok(DeskReply::Tickets(cx.state().open.clone())),
        }
    }

    /// A bot's message is a ticket in its own words.
    fn from_agent(&self, sender: &str, text: &str) -> Result<DeskMsg, String> {
        Ok(DeskMsg::File {
            by: sender.to_string(),
            text: text.to_string(),
        })
    }

    fn reply_text(&self, reply: &DeskReply) -> String {
        match reply {
            DeskReply::Filed(id) => format!("ticket #{id} is filed"),
            DeskReply::Tickets(t) => format!("{} open ticket(s)", t.len()),
        }
    }
}

fn options() -> KindOptions {
    KindOptions::default()
        .offer("the ticket desk: send it a problem in one message and it files a ticket")
        .idle_after(Some(Duration::from_secs(60)))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let model = Arc::new(ScriptedProvider::new(vec![
        Turn::tool_call(
            "message_agent",
            json!({"target": "desk", "message": "The printer on floor 2 is jammed."}),
        ),
        Turn::text("I asked the desk to file it.").expecting("Delivered to `desk`"),
        // The desk's answer arrives as a notice and starts a turn.
        Turn::text("The desk filed it as ticket #1.").expecting("ticket #1 is filed"),
    ]));
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(model.clone())
        .build()
        .await?;
    let desks = runtime
        .register_with("desk", options(), |_key: &str| Desk)
        .await?;
    let desk = desks.address("main");

    // A conversation opened now has the desk in its roster.
    let bot = runtime.bot("assistant").await?.new_conversation().await?;
    let mut events = runtime.node().subscribe();
    let report = bot
        .send("Please report the jammed printer.")
        .await?
        .result()
        .await?;
    println!("assistant: {}", report.text);
    // Wait for the turn the desk's reply starts, and its end.
    tokio::time::timeout(Duration::from_secs(20), async {
        let mut ended = 0;
        while let Ok(event) = events.recv().await {
            if event.conversation == bot.conversation() {
                if let AgentEvent::TurnFinished { text, .. } = event.event {
                    ended += 1;
                    // The first is the turn above; the second answers the notice.
                    if ended == 2 {
                        println!("assistant, on the desk's reply: {text}");
                        break;
                    }
                }
            }
        }
    })
    .await?;

    // The program files one itself, durably: committed before this returns.
    let id = runtime
        .send_durable(
            &desk,
            DeskMsg::File {
                by: "program".into(),
                text: "Order more paper.".into(),
            },
        )
        .await?;
    println!("filed durably (delivery {id})");
    let before = runtime.call(&desk, DeskMsg::List).await?;
    println!("before the restart: {before:?}");
    runtime.shutdown().await;

    // A new process on the same home: the desk comes back with its tickets.
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(ScriptedProvider::new(vec![])))
        .build()
        .await?;
    let desks = runtime
        .register_with("desk", options(), |_key: &str| Desk)
        .await?;
    let DeskReply::Tickets(tickets) = runtime.call(&desks.address("main"), DeskMsg::List).await?
    else {
        anyhow::bail!("the desk did not list its tickets");
    };
    for t in &tickets {
        println!("after the restart: #{} by {}: {}", t.id, t.by, t.text);
    }
    anyhow::ensure!(tickets.len() == 2, "expected 2 tickets, got {tickets:?}");
    anyhow::ensure!(
        tickets[0].by == "assistant",
        "the bot's ticket: {tickets:?}"
    );
    runtime.shutdown().await;
    Ok(())
}
